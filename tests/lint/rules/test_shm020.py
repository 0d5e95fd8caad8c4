"""SHM020 `swarm-ignores-shm`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import FIXTURES, at, findings, only

from shmguard.lint.check import check_loaded, fix_file
from shmguard.sources.load import load_bytes


def test_shm020_stack_file_shm_settings() -> None:
    fs = findings("swarm_stack.yaml", "SHM020")
    assert at(fs) == [
        ("SHM020", "warning", 5, 15),  # shm_size ignored
        ("SHM020", "warning", 6, 10),  # ipc ignored
        ("SHM020", "warning", 8, 9),  # tmpfs: dropped
        ("SHM020", "error", 17, 23),  # tmpfs.size as a string; serve has its volume: no more
    ]
    assert "(service 'train' has deploy.placement)" in fs[0].message
    assert fs[0].fix is not None and "size: 8589934592" in fs[0].fix.description
    assert fs[2].fix is not None and "size: 4294967296" in fs[2].fix.description
    assert "must be a integer" in fs[3].message and "write 2147483648" in fs[3].message
    fixed = fix_file((FIXTURES / "swarm_stack.yaml").read_bytes(), "stack.yaml").data
    assert b"tmpfs: {size: 2147483648}" in fixed and b"shm_size: 8g" in fixed


def test_shm020_needs_a_swarm_only_field_and_no_compose_only_one() -> None:
    assert findings("swarm_but_compose.yaml", "SHM020") == []  # container_name: compose
    src = b"services:\n  t:\n    image: pytorch/pytorch\n    shm_size: 8g\n"
    src += b"    deploy: {replicas: 2}\n"  # replicas alone: docker compose honours it
    assert check_loaded(load_bytes(src, "c.yaml"), rules=only("SHM020")).findings == ()
    src = b"services:\n  t:\n    image: x\n    shm_size: 8g\nnetworks:\n  n: {driver: overlay}\n"
    (f,) = check_loaded(load_bytes(src, "c.yaml"), rules=only("SHM020")).findings
    assert "network 'n' has driver: overlay" in f.message

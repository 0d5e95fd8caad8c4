"""SHM019 `shm-size-only-under-build`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import fixes_of

from shmguard.lint.check import check_loaded, fix_file
from shmguard.model.fix import Setting
from shmguard.sources.load import load_bytes

BUILD_FLOW = (
    b"services:\n"
    b"  train:\n"
    b"    build: {context: ., shm_size: 8g}\n"
    b"    image: nvcr.io/nvidia/pytorch:24.01-py3\n"
    b"    command: torchrun --nproc-per-node 8 train.py\n"
)


def test_build_size_is_shm019_alone_with_the_users_size_safe() -> None:
    assert fixes_of(BUILD_FLOW) == [
        ("SHM019", 'Add shm_size: "8g" to the service', "safe", ('    shm_size: "8g"\n',))
    ]
    r = fix_file(BUILD_FLOW, "compose.yaml")
    assert r.data == BUILD_FLOW.replace(b"  train:\n", b'  train:\n    shm_size: "8g"\n')
    assert [f.code for f in r.applied] == ["SHM019"] and r.remaining.findings == ()


def test_build_size_in_bytes_written_in_go_units_and_unsafe_above_the_memory_limit() -> None:
    src = (
        b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 4g\n"
        b"    build:\n      context: .\n      shm_size: 8589934592\n"
    )
    # 8 GiB beside a 4 GiB limit keeps no margin: applied only with --unsafe-fixes
    assert fixes_of(src) == [
        ("SHM019", 'Add shm_size: "8g" to the service', "unsafe", ('    shm_size: "8g"\n',))
    ]
    assert fix_file(src, "compose.yaml").data == src
    fixed = fix_file(src, "compose.yaml", unsafe=True).data
    # then SHM010 (8 GiB of shm beside a 4 GiB limit) raises the limit by the policy: 9g
    assert fixed == src.replace(b"  t:\n", b'  t:\n    shm_size: "8g"\n').replace(
        b"mem_limit: 4g", b"mem_limit: 9g"
    )
    (f,) = check_loaded(load_bytes(src, "compose.yaml")).findings
    assert f.fix is not None and [(c.setting, c.value) for c in f.fix.changes] == [
        (Setting.SHM_SIZE, 8 << 30)
    ]


def test_build_size_that_fits_the_memory_limit_is_safe() -> None:
    src = (
        b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 16g\n"
        b"    build:\n      shm_size: '512m'\n"
    )
    assert fixes_of(src) == [
        ("SHM019", 'Add shm_size: "512m" to the service', "safe", ('    shm_size: "512m"\n',))
    ]


def test_build_size_placeholder_is_shown_not_applied() -> None:
    src = b"services:\n  t:\n    image: pytorch/pytorch\n    build:\n      shm_size: ${SHM}\n"
    assert fixes_of(src) == [("SHM019", "Add shm_size: ${SHM} to the service", "display-only", ())]


def test_flow_style_service_gets_shm019_inserted() -> None:
    src = b"services: {train: {build: {shm_size: 2g}, image: pytorch/pytorch}}\n"
    r = fix_file(src, "compose.yaml")
    assert r.data == (
        b'services: {train: {shm_size: "2g", build: {shm_size: 2g}, image: pytorch/pytorch}}\n'
    )
    assert [f.code for f in r.applied] == ["SHM019"]

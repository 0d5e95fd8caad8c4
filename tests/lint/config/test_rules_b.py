"""SHM005, SHM020, SHM022, SHM026 and SHM029 on fixtures, with exact line:column."""

from __future__ import annotations

import json
from pathlib import Path

from shmguard.lint.check import check_loaded, fix_file
from shmguard.lint.config import RULES
from shmguard.lint.engine import Rule
from shmguard.model.finding import Finding
from shmguard.sources.load import load_bytes, load_path

FIXTURES = Path(__file__).parent / "fixtures_rules_b"


def _only(code: str) -> list[Rule]:  # type: ignore[type-arg]
    return [r for r in RULES if r.code == code]


def findings(name: str, code: str) -> list[Finding]:
    return list(check_loaded(load_path(str(FIXTURES / name)), rules=_only(code)).findings)


def at(fs: list[Finding]) -> list[tuple[str, str, int, int]]:
    out = []
    for f in fs:
        assert f.location is not None
        out.append((f.code, f.severity.value, f.location.line or 0, f.location.column or 0))
    return out


def test_shm005_decimal_beside_binary_and_exa() -> None:
    fs = findings("shm005_decimal.yaml", "SHM005")
    assert at(fs) == [
        ("SHM005", "info", 7, 45),
        ("SHM005", "info", 14, 28),
        ("SHM005", "info", 28, 26),  # E flagged even where nothing else is binary
    ]
    assert "'16G' is decimal (16 x 10^9 bytes)" in fs[0].message
    assert "'64Gi'" in fs[0].message and "write 16Gi" in fs[0].message
    assert (
        fs[0].fix is not None and fs[0].fix.edits == () and fs[0].fix.title.startswith("Write 16Gi")
    )
    assert "500Mi" in fs[1].message
    assert "2 exabytes" in fs[2].message and fs[2].fix is None


def test_shm005_silent_on_decimal_only_and_exponent() -> None:
    src = (
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n"
        b"    resources: {limits: {memory: 2G}, requests: {memory: 1e9}}\n"
    )
    assert check_loaded(load_bytes(src, "p.yaml"), rules=_only("SHM005")).findings == ()


def test_shm022_daemon_json_number_is_spliced_as_a_string() -> None:
    (f,) = findings("daemon_number.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 3, 23)]
    assert 'invalid size: "2147483648"' in f.message
    assert f.fix is not None and f.fix.applicability.value == "safe"
    src = (FIXTURES / "daemon_number.json").read_bytes()
    fixed = fix_file(src, "daemon.json").data
    assert json.loads(fixed) == {"log-driver": "json-file", "default-shm-size": "2g"}
    assert fixed == src.replace(b"2147483648", b'"2g"')


def test_shm022_kubernetes_suffix_and_small_number() -> None:
    (f,) = findings("daemon_gi.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 2, 23)]
    assert "invalid suffix: 'gi'" in f.message
    fixed = fix_file((FIXTURES / "daemon_gi.json").read_bytes(), "daemon.json").data
    assert json.loads(fixed)["default-shm-size"] == "2g"
    (f,) = findings("daemon_small.json", "SHM022")
    assert at([f]) == [("SHM022", "error", 1, 22)]
    assert f.fix is not None and f.fix.edits == () and "under 1 MiB" in f.message
    assert findings("daemon_good.json", "SHM022") == []


def test_shm029_bytes_and_strings_in_mib_fields() -> None:
    fs = findings("ecs_bytes.json", "SHM029")
    assert at(fs) == [
        ("SHM029", "error", 9, 29),
        ("SHM029", "error", 10, 57),
        ("SHM029", "error", 16, 47),
    ]
    assert "2,147,483,648 MiB is 2,048 TiB" in fs[0].message and "is 2048 MiB" in fs[0].message
    assert "is a string" in fs[1].message and "write 1024" in fs[1].message
    assert "about 1908 MiB" in fs[2].message
    apps = [f.fix.applicability.value if f.fix and f.fix.edits else None for f in fs]
    assert apps == ["safe", "safe", None]  # 2,000,000,000 bytes is no whole MiB: display-only
    fixed = json.loads(fix_file((FIXTURES / "ecs_bytes.json").read_bytes(), "td.json").data)
    lp = fixed["containerDefinitions"][0]["linuxParameters"]
    assert lp == {"sharedMemorySize": 2048, "tmpfs": [{"containerPath": "/scratch", "size": 1024}]}
    assert fixed["containerDefinitions"][1]["linuxParameters"]["sharedMemorySize"] == 2000000000


def test_shm029_fargate_and_good() -> None:
    fs = findings("ecs_fargate.json", "SHM029")
    assert at(fs) == [("SHM029", "error", 8, 47), ("SHM029", "error", 8, 47)]
    assert "write 2048" in fs[0].message
    assert "FARGATE in requiresCompatibilities" in fs[1].message and fs[1].fix is None
    assert findings("ecs_good.json", "SHM029") == []


def test_shm026_redundant_dshm_and_plasma_directory() -> None:
    fs = findings("kuberay.yaml", "SHM026")
    assert at(fs) == [
        ("SHM026", "info", 15, 28),  # head: dshm without sizeLimit beside a 32Gi limit
        ("SHM026", "info", 28, 54),  # worker: sizeLimit equal to the limit
        ("SHM026", "info", 57, 9),  # RayJob head: plasma-directory and no /dev/shm
    ]  # own-size worker, the submitter pod and the worker that mounts one: nothing
    assert "without a sizeLimit" in fs[0].message and "(32Gi)" in fs[0].message
    assert "the same as KubeRay's" in fs[1].message
    assert "'/mnt/plasma' makes KubeRay skip" in fs[2].message and "64 MiB" in fs[2].message
    assert all(f.fix is not None and f.fix.edits == () for f in fs)


def test_shm026_only_for_kuberay_kinds() -> None:
    src = (FIXTURES / "kuberay.yaml").read_text().split("---")[0]
    src = src.replace("ray.io/v1", "example.com/v1")
    assert check_loaded(load_bytes(src.encode(), "x.yaml"), rules=_only("SHM026")).findings == ()


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
    assert check_loaded(load_bytes(src, "c.yaml"), rules=_only("SHM020")).findings == ()
    src = b"services:\n  t:\n    image: x\n    shm_size: 8g\nnetworks:\n  n: {driver: overlay}\n"
    (f,) = check_loaded(load_bytes(src, "c.yaml"), rules=_only("SHM020")).findings
    assert "network 'n' has driver: overlay" in f.message

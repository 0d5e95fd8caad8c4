"""Every SHM rule on fixtures, with exact file:line:column, severity and fix applicability."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.config import Config
from shmguard.lint.check import CheckOptions, check_loaded
from shmguard.lint.config import RULES
from shmguard.model import Severity
from shmguard.sources.load import load_bytes, load_path

FIXTURES = Path(__file__).parent / "fixtures"


def found(name: str, **kw: object) -> list[tuple[str, str, int, int, str | None]]:
    r = check_loaded(load_path(str(FIXTURES / name)), **kw)  # type: ignore[arg-type]
    out = []
    for f in r.findings:
        assert f.location is not None and f.location.file == str(FIXTURES / name)
        app = f.fix.applicability.value if f.fix is not None and f.fix.edits else None
        out.append((f.code, f.severity.value, f.location.line or 0, f.location.column or 0, app))
    return out


def test_compose_fixture() -> None:
    assert found("compose_bad.yaml") == [
        ("SHM019", "warning", 8, 17, "safe"),  # not SHM001 too: the size is only under build
        ("SHM002", "error", 11, 15, "safe"),
        ("SHM012", "warning", 11, 15, None),
        ("SHM023", "warning", 19, 9, None),
        ("SHM013", "error", 22, 10, "safe"),  # serve is not ipc: shareable
        ("SHM011", "warning", 23, 15, None),
    ]


def test_kubernetes_fixture() -> None:
    assert found("pod_bad.yaml") == [
        ("SHM023", "warning", 10, 20, None),
        ("SHM025", "warning", 14, 24, None),
        ("SHM004", "error", 16, 34, "safe"),
        ("SHM006", "error", 21, 34, "safe"),
        ("SHM003", "error", 21, 53, "safe"),
        ("SHM023", "warning", 23, 32, None),
        ("SHM007", "error", 41, 17, "safe"),  # dshm is mounted in vllm, not in plain
        ("SHM009", "warning", 47, 24, None),
        ("SHM008", "warning", 65, 21, "unsafe"),
    ]


def test_run_line_fixture() -> None:
    assert found("run_lines.sh") == [
        ("SHM001", "warning", 2, 1, "safe"),
        ("SHM011", "warning", 3, 23, None),
        ("SHM011", "error", 4, 23, None),  # podman refuses --shm-size with --ipc=host
        ("SHM002", "error", 5, 12, "safe"),
        ("SHM002", "error", 5, 27, "safe"),
        ("SHM012", "warning", 6, 37, None),
        ("SHM023", "warning", 7, 12, None),
    ]


def test_good_fixture_is_clean() -> None:
    # a sized dshm, HugePages medium, a KubeRay head and an MPIJob launcher: nothing to say
    assert found("pod_good.yaml") == []


def test_lint_traps_compose_detected_only_by_services() -> None:
    # shm_size: 2Gi is right in a Helm values file: no Compose, no finding
    lf = load_bytes(b"shm_size: 2Gi\nimage: pytorch/pytorch\n", "values.yaml")
    assert check_loaded(lf).findings == ()


def test_build_only_service_and_gpu_alone_are_not_ml_enough_for_shm001() -> None:
    # corpus review: an image to build (docker compose build) and nvidia-smi in nvidia/cuda
    src = b"services:\n  vllm:\n    image: vllm/vllm-openai\n    build: {context: .}\n"
    assert check_loaded(load_bytes(src, "build.yaml")).findings == ()
    lf = load_bytes(b"docker run --rm --gpus all nvidia/cuda:12.0.0-base nvidia-smi\n", "a.md")
    assert check_loaded(lf).findings == ()


def test_severity_per_workload_from_config() -> None:
    conf = Config(workload_severity={"ml": {"SHM001": Severity.ERROR}})
    assert found("run_lines.sh", config=conf)[0][:2] == ("SHM001", "error")
    conf = Config(ignore=("SHM00",))
    assert {c for c, *_ in found("run_lines.sh", config=conf)} == {"SHM011", "SHM012", "SHM023"}


def test_fix_size_capped_by_memory_limit_or_withheld() -> None:
    src = b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 1088m\n"
    (f,) = check_loaded(load_bytes(src, "c.yaml")).findings
    assert f.fix is None  # 1088m leaves only 64 MiB beside a 1 GiB margin: report, no fix
    src = b"services:\n  t:\n    image: pytorch/pytorch\n    mem_limit: 1792m\n"
    (f,) = check_loaded(load_bytes(src, "c.yaml")).findings
    # the 1 GiB default capped at what 1792m leaves beside the 1 GiB margin
    assert f.fix is not None and f.fix.edits[0].content == '    shm_size: "768m"\n'
    (f,) = check_loaded(load_bytes(src, "c.yaml"), CheckOptions(shm_size=2 << 30)).findings
    assert f.fix is not None and f.fix.edits[0].content == '    shm_size: "2g"\n'


def test_compose_extends_and_ipc_host_are_resolved() -> None:
    src = (
        b"x-common: &c\n  ipc: host\nservices:\n  a:\n    <<: *c\n    image: pytorch/pytorch\n"
        b"  b:\n    extends: a\n"
    )
    assert check_loaded(load_bytes(src, "c.yaml")).findings == ()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_metadata(rule: object) -> None:
    from shmguard.lint.engine import Rule

    assert isinstance(rule, Rule)
    assert rule.code.startswith("SHM") and len(rule.code) == 6
    d = rule.doc
    for name in ("what", "why", "fix", "fix_safety"):
        assert getattr(d, name).strip(), f"{rule.code}: empty {name}"
    # whole example files instead of an excerpt (tests/lint/test_rule_examples.py runs them)
    assert d.bad is not None and d.good is not None and not d.example
    assert "Sources:" in d.what
    assert rule.name == rule.name.lower() and " " not in rule.name


def test_codes_unique_and_in_order() -> None:
    codes = [r.code for r in RULES]
    assert codes == sorted(set(codes))

"""The verbatim torch 2.13 outputs of shared/research/torch_measurements/failures/ (copied to
tests/fixtures/logs/torch_2.13/; measured
with a 64 MiB /dev/shm; see torch_shm.md section 2) are each diagnosed correctly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _triage_helpers import FIXTURES

from shmguard.triage import explain_files
from shmguard.triage.model import Signature

FAILURES = FIXTURES / "torch_2.13"

# scenario file prefix -> (exit status, top result id, ids that must also be there)
EXPECTED = {
    "S01": (1, "torch-shm-alloc-failed", ()),
    "S02": (0, None, ()),  # passed: nothing to explain
    "S03": (1, "torch-shm-alloc-failed", ()),  # file_system strategy, same text
    "S04": (1, "torch-shm-alloc-failed", ()),  # pin_memory warning is not a cause
    "S05": (1, "torch-shm-alloc-failed", ()),
    "S06": (0, None, ()),
    "S07": (1, "torch-shm-alloc-failed", ()),
    "S08": (1, "torch-shm-alloc-failed", ()),
    "S09": (1, "dataloader-feeder-failure", ("torch-shm-alloc-failed",)),  # the hang
    "S10": (1, "dataloader-feeder-failure", ("dataloader-timeout",)),  # hang -> timeout
    "S11": (1, "dataloader-bus-error", ("dataloader-worker-exited",)),  # SIGBUS + NUL byte
    "S12": (0, None, ()),
    "S13_": (1, "torch-shm-alloc-failed", ()),
    "S13b": (1, "dataloader-feeder-failure", ()),
    "S14": (1, "dataloader-feeder-failure", ()),
    "S15": (0, None, ()),
    "S16": (0, None, ()),
    "S17": (0, None, ()),
    "S18": (0, None, ()),
}


def _expected(path: Path) -> tuple[int, str | None, tuple[str, ...]]:
    for prefix, exp in EXPECTED.items():
        if path.name.startswith(prefix):
            return exp
    raise AssertionError(f"no expectation for {path.name}")


FILES = sorted(FAILURES.glob("S*.txt"))


def test_all_scenarios_have_expectations() -> None:
    assert len(FILES) == 19
    for p in FILES:
        _expected(p)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_torch_failure_diagnosed(path: Path, catalogue: Sequence[Signature]) -> None:
    exit_code, top, also = _expected(path)
    d = explain_files([path], signatures=catalogue)
    assert d.exit_code == exit_code
    causes = [r for r in d.results if r.role == "cause"]
    if top is None:
        assert not any(r.confidence != "low" for r in causes)
        return
    assert causes[0].id == top
    assert causes[0].confidence == "high"
    ids = {r.id for r in d.results}
    assert set(also) <= ids
    # a consequence (worker exited, timeout, bare ENOSPC) never ranks above its cause
    for r in d.results:
        if r.explained_by:
            assert r.confidence == "low" and r.fix is None


@pytest.mark.timeout(60)
def test_sigbus_nul_byte_line_is_evidence(catalogue: Sequence[Signature]) -> None:
    path = next(p for p in FILES if p.name.startswith("S11"))
    raw = path.read_bytes()
    nul_line = raw[: raw.index(b"\x00")].count(b"\n") + 1
    d = explain_files([path], signatures=catalogue)
    bus = next(r for r in d.results if r.id == "dataloader-bus-error")
    lines = [e.line for e in bus.evidence]
    assert nul_line in lines
    ev = next(e for e in bus.evidence if e.line == nul_line)
    assert "\x00" not in ev.text and ev.text.startswith("ERROR: Unexpected bus error")

"""The in-memory entry point: the same results as ``explain`` on a stream, catalogue cached."""

from __future__ import annotations

from _triage_helpers import FIXTURES, diagnose_text

from shmguard.triage import classify_text, top_cause
from shmguard.triage.model import Signature
from shmguard.triage.text import builtin_catalogue, signature_by_id

SIGBUS = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory (shm).\n\x00Traceback (most recent call last):\n"
    "RuntimeError: DataLoader worker (pid 23254) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory. Please try to raise your shared "
    "memory limit.\n"
    "RuntimeError: DataLoader worker (pid(s) 23254) exited unexpectedly\n"
)


def test_results_equal_explain_on_the_same_text(catalogue: tuple[Signature, ...]) -> None:
    expected = diagnose_text(SIGBUS, catalogue).results
    assert classify_text(SIGBUS, "log") == expected
    assert classify_text(SIGBUS.encode(), "log") == expected
    assert [r.id for r in expected][:1] == ["dataloader-bus-error"]
    # The consequence ranks after the cause, as explain shows it.
    exited = next(r for r in expected if r.id == "dataloader-worker-exited")
    assert exited.explained_by == "dataloader-bus-error"


def test_every_fixture_log_classifies_as_explain_does(catalogue: tuple[Signature, ...]) -> None:
    logs = sorted(FIXTURES.glob("*.log"))
    assert logs
    for path in logs:
        data = path.read_bytes()
        assert classify_text(data, "log") == diagnose_text(data, catalogue).results, path.name


def test_top_cause_and_names() -> None:
    results = classify_text(SIGBUS, "run-7")
    top = top_cause(results)
    assert top is not None and top.id == "dataloader-bus-error"
    assert {ev.file for r in results for ev in r.evidence} == {"run-7"}
    assert all("\x00" not in ev.text for r in results for ev in r.evidence)
    assert top_cause(classify_text("epoch 1 loss 0.3\n")) is None
    assert classify_text(b"") == ()


def test_catalogue_loaded_once() -> None:
    assert builtin_catalogue() is builtin_catalogue()
    assert signature_by_id()["disk-full"].kind == "disk_full"
    assert len(signature_by_id()) == len(builtin_catalogue())

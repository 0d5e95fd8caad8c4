"""The scoring of explain against labelled reports (shared by the tests and the benchmark)."""

from __future__ import annotations

from collections.abc import Sequence

from _triage_helpers import diagnose_text

from shmguard.triage.model import Signature
from shmguard.triage.scoring import accepts, score

BUS = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.\n"
OOM = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed.\n"


def test_labels_accept_their_catalogue_kinds() -> None:
    assert accepts("dataloader_shm") == {"dataloader_shm"}
    assert accepts("k8s_emptydir") == {"k8s_emptydir", "dataloader_shm"}


def test_a_right_top_cause_and_shm_advice(catalogue: Sequence[Signature]) -> None:
    s = score({"kind": "dataloader_shm", "lookalike": False}, diagnose_text(BUS, catalogue))
    assert (s.top, s.right, s.lookalike, s.shm_advice) == (
        "dataloader-bus-error",
        True,
        False,
        True,
    )


def test_a_lookalike_is_scored_for_shm_advice(catalogue: Sequence[Signature]) -> None:
    s = score({"kind": "cgroup_oom", "lookalike": True}, diagnose_text(OOM, catalogue))
    assert s.lookalike and not s.shm_advice
    wrong = score({"kind": "cgroup_oom"}, diagnose_text(BUS, catalogue))
    assert wrong.lookalike and wrong.shm_advice and not wrong.right
    assert score({"kind": "memlock"}, diagnose_text("hello\n", catalogue)).top is None

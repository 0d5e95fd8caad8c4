"""Scoring ``explain`` against labelled reports: is the top cause right, did a look-alike get
shm advice?

One definition for the report tests (tests/triage) and the accuracy benchmark
(benchmarks/explain_accuracy.py). A report is a mapping with at least ``kind`` (the
established cause) and ``lookalike`` (True when the cause is not /dev/shm capacity or shm
configuration); the corpus format is described in tests/fixtures/corpus/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shmguard.triage.model import Diagnosis

#: Report labels that stand for several catalogue kinds. A label mixes the failure with the
#: runtime that fixed it: a report labelled k8s_emptydir whose log is a DataLoader shm failure
#: is diagnosed as dataloader_shm (the log cannot show it ran in Kubernetes); vLLM's shm
#: failures are NCCL's; 'other' is any cause that is not shm capacity (among them huge pages a
#: container may not use, and a GPU kernel's on-chip shared memory).
ACCEPTS: Mapping[str, frozenset[str]] = {
    "k8s_emptydir": frozenset({"k8s_emptydir", "dataloader_shm"}),
    "compose_config": frozenset({"compose_config", "runtime_config"}),
    "docker_run_config": frozenset({"docker_run_config", "runtime_config"}),
    "vllm_shm": frozenset({"vllm_shm", "nccl_shm"}),
    "other": frozenset({"nccl_shm_attach", "vllm_stall", "info", "other", "hugepages", "gpu_smem"}),
}

#: Labels whose cause is never /dev/shm capacity, whatever the report's ``lookalike`` says.
LOOKALIKE_KINDS = frozenset(
    {
        "cgroup_oom",
        "cuda_oom",
        "nccl_network",
        "disk_full",
        "memlock",
        "mmap_truncated",
        "hugepages",
        "gpu_smem",
    }
)


def accepts(kind: str) -> frozenset[str]:
    """The catalogue kinds that count as right for a report labelled ``kind``."""
    return ACCEPTS.get(kind, frozenset({kind}))


@dataclass(frozen=True)
class Score:
    """How ``explain`` did on one report.

    Attributes:
        top: the id of the top result, or None when nothing matched.
        right: the top result's kind (or one it lists in ``also``) is accepted for the label.
        lookalike: the report's cause is not /dev/shm.
        shm_advice: some result printed a /dev/shm size (wrong for a look-alike).
    """

    top: str | None
    right: bool
    lookalike: bool
    shm_advice: bool


def score(report: Mapping[str, object], diagnosis: Diagnosis) -> Score:
    """Score ``diagnosis`` (of the report's log) against the report's label."""
    kind = str(report["kind"])
    lookalike = bool(report.get("lookalike")) or kind in LOOKALIKE_KINDS
    top = diagnosis.results[0] if diagnosis.results else None
    right = top is not None and bool({top.kind, *top.also} & accepts(kind))
    advice = any(
        r.fix is not None and r.fix.shm_size is not None and r.explained_by is None
        for r in diagnosis.results
    )
    return Score(top.id if top else None, right, lookalike, advice)

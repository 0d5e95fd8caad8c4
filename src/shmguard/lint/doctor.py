"""`doctor`: environment rules (ENV0xx) over host facts. The library part; the CLI renders.

``diagnose(facts, options)`` runs the rules of :data:`shmguard.lint.env.RULES` through the one
rule engine (:func:`shmguard.lint.engine.run_rules`) and returns a :class:`DoctorReport`.
Rules are pure: all I/O happened in :func:`shmguard.inspect.inspect_host`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shmguard.config import Config
from shmguard.lint.engine import Rule, run_rules
from shmguard.lint.env._base import DoctorOptions, shm_fix
from shmguard.model import Finding
from shmguard.model.host import HostFacts

__all__ = ["DoctorOptions", "DoctorReport", "diagnose", "shm_fix", "workload_of"]

#: Holder kinds (``inspect.holders.classify_shm_name``) that mark a PyTorch / NCCL /
#: inference workload.
_ML_KINDS = ("torch", "nccl", "psm", "plasma")


@dataclass(frozen=True)
class DoctorReport:
    """Facts, the workload class they show, and the findings, most severe first, then by
    code."""

    facts: HostFacts
    findings: tuple[Finding, ...]
    workload: str = "container"


def workload_of(facts: HostFacts) -> str:
    """``ml`` when the host shows a PyTorch / NCCL / inference workload (a process holding
    torch, NCCL, PSM or Ray plasma shm, leftover ``torch_*`` files, a GPU, or torch imported
    with ``--torch``), else ``container``."""
    held = facts.holders.value
    if held is not None and any(held.by_kind.get(k, 0) > 0 for k in _ML_KINDS):
        return "ml"
    gpus = facts.gpus.value
    if facts.shm.leftovers.value or (gpus is not None and gpus.gpus):
        return "ml"
    return "ml" if facts.torch.value is not None else "container"


def diagnose(
    facts: HostFacts,
    options: DoctorOptions | None = None,
    rules: Iterable[Rule[HostFacts, DoctorOptions]] | None = None,
    *,
    config: Config | None = None,
    workload: str | None = None,
) -> DoctorReport:
    """Run the rules (default: all of :data:`shmguard.lint.env.RULES`) over ``facts``.

    ``config`` selects rules and sets severities; ``workload`` (``container`` or ``ml``)
    overrides :func:`workload_of`.
    """
    if rules is None:
        from shmguard.lint.env import RULES

        rules = RULES
    options = options or DoctorOptions()
    workload = workload or workload_of(facts)
    findings = run_rules(rules, facts, options, config=config, workload=workload)
    return DoctorReport(facts, findings, workload)

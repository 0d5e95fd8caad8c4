"""`doctor`: environment rules (ENV0xx) over host facts. The library part; the CLI renders.

``diagnose(facts, options)`` runs every rule of :data:`registry.RULES` and returns a
:class:`DoctorReport`. Rules are pure: all I/O happened in :func:`shmguard.inspect.inspect_host`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shmguard.doctor._base import DoctorOptions, Rule
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding

__all__ = ["DoctorOptions", "DoctorReport", "Rule", "diagnose"]


@dataclass(frozen=True)
class DoctorReport:
    """Facts and the findings drawn from them, most severe first, then by code."""

    facts: HostFacts
    findings: tuple[Finding, ...]


def diagnose(
    facts: HostFacts,
    options: DoctorOptions | None = None,
    rules: Iterable[Rule] | None = None,
) -> DoctorReport:
    """Run the rules (default: all of :data:`shmguard.doctor.registry.RULES`) over ``facts``."""
    if rules is None:
        from shmguard.doctor.registry import RULES

        rules = RULES
    options = options or DoctorOptions()
    findings = [f for rule in rules for f in rule.check(facts, options)]
    findings.sort(key=lambda f: (-f.severity.rank, f.code))
    return DoctorReport(facts, tuple(findings))

"""The shared value types: facts, findings, fixes and exit status (frozen dataclasses).

Knows no rule, no host and no renderer: everything else builds on these values.
"""

from __future__ import annotations

from shmguard.model.fact import Fact
from shmguard.model.finding import (
    Applicability,
    Edit,
    FailOn,
    Finding,
    Fix,
    Location,
    Severity,
    apply_edits,
    exit_status,
)
from shmguard.model.fix import RUNTIMES, Change, Setting, shm_changes

__all__ = [
    "RUNTIMES",
    "Applicability",
    "Change",
    "Edit",
    "Fact",
    "FailOn",
    "Finding",
    "Fix",
    "Location",
    "Setting",
    "Severity",
    "apply_edits",
    "exit_status",
    "shm_changes",
]

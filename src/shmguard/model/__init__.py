"""The shared value types: facts, findings, fixes and exit status (frozen dataclasses)."""

from __future__ import annotations

from shmguard.model.fact import Fact
from shmguard.model.finding import (
    Edit,
    FailOn,
    Finding,
    Fix,
    Location,
    Severity,
    Snippet,
    exit_status,
)

__all__ = [
    "Edit",
    "Fact",
    "FailOn",
    "Finding",
    "Fix",
    "Location",
    "Severity",
    "Snippet",
    "exit_status",
]

"""Counts in words, shared by the text renderers of ``check`` and ``doctor``.

``1 finding``, ``2 findings``; severities as ``1 error, 2 warnings, 0 info`` ("info" is a
mass noun: no ``infos``).
"""

from __future__ import annotations

from collections.abc import Iterable

from shmguard.model.finding import Finding, Severity


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` (with thousands separators) and ``noun``, in the plural (``nouns``, else
    ``noun + "s"``) unless ``n == 1``."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def severity_counts(findings: Iterable[Finding]) -> str:
    """``E errors, W warnings, I info`` (most severe first, every severity named)."""
    counts = dict.fromkeys(Severity, 0)
    for f in findings:
        counts[f.severity] += 1
    return ", ".join(
        plural(counts[s], s.value, "info" if s is Severity.INFO else None)
        for s in sorted(Severity, key=lambda s: -s.rank)
    )

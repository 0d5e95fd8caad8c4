"""Counts in words: one helper for check's and doctor's summaries."""

from __future__ import annotations

from shmguard.model.finding import Finding, Severity
from shmguard.render.words import plural, severity_counts


def _f(sev: Severity) -> Finding:
    return Finding("SHM001", "x", sev, "m", "w", None, None)


def test_plural() -> None:
    assert [plural(n, "finding") for n in (0, 1, 2)] == ["0 findings", "1 finding", "2 findings"]
    assert plural(3, "process", "processes") == "3 processes"


def test_severity_counts_most_severe_first_info_uncounted_noun() -> None:
    assert severity_counts([]) == "0 errors, 0 warnings, 0 info"
    assert severity_counts([_f(Severity.WARNING)]) == "0 errors, 1 warning, 0 info"
    fs = [_f(Severity.ERROR), _f(Severity.INFO), _f(Severity.INFO), _f(Severity.ERROR)]
    assert severity_counts(fs) == "2 errors, 0 warnings, 2 info"

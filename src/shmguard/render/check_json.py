"""`check`'s JSON document (``shmguard.check/1``, src/shmguard/schemas/check.schema.json): the
one serialization of a :class:`~shmguard.lint.report.CheckReport`, in the envelope of
:mod:`shmguard.render.json`.

``files``: per file its path, kind, findings and diagnostics, in the order checked;
``summary``: findings per severity, files, fixes, baselined findings, the threshold, the exit
status and the configuration file read; ``skipped`` (and ``summary.skipped``, counts by
reason): the files a directory walk met and did not check.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from shmguard.render.json import dumps

if TYPE_CHECKING:
    from shmguard.lint.report import CheckReport

__all__ = ["check_body", "check_json"]

#: The severities counted in the summary, in the schema's order.
_LEVELS = ("error", "warning", "info")


def check_body(report: CheckReport) -> dict[str, Any]:
    """The document's body (before the envelope): ``files`` and ``summary``."""
    findings = report.findings
    counts = {s: sum(f.severity.value == s for f in findings) for s in _LEVELS}
    return {
        "files": [
            {
                "file": r.path,
                "kind": r.kind,
                "findings": r.findings,
                "diagnostics": [dataclasses.asdict(d) for d in r.diagnostics],
            }
            for r in report.results
        ],
        "skipped": [{"file": path, "reason": why} for path, why in report.skipped],
        "summary": {
            **counts,
            "files": len(report.files),
            "fixed": report.fixed,
            "baselined": report.baselined,
            "fail_on": report.fail_on,
            "exit_status": report.exit_status,
            "config": str(report.config) if report.config is not None else None,
            "skipped": report.skipped_counts,
        },
    }


def check_json(report: CheckReport) -> str:
    """The whole document as indented JSON text (no final newline)."""
    return dumps("check", check_body(report))

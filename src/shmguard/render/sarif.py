"""SARIF 2.1.0 output of ``shmguard check`` (``--format sarif``), for GitHub code scanning and
other SARIF consumers.

The log follows the OASIS SARIF 2.1.0 standard (errata 01; the schema is vendored with its
licence in tests/fixtures/schemas/ and the tests validate against it): one ``run`` whose
``tool.driver.rules`` describe every rule checked (summary, the rule's "What it detects", the
full rule documentation as ``help``, the default level; no ``helpUri``: the project publishes
its docs with the source, at no fixed URL) and
whose ``results`` are the findings. Choices, each from the standard (section numbers of
SARIF 2.1.0):

* ``level`` (3.27.10): ``error`` -> ``error``, ``warning`` -> ``warning``, ``info`` -> ``note``.
* ``region`` (3.30): ``startLine``/``startColumn``/``endLine``/``endColumn``, 1-based, the end
  column being the one after the flagged text (3.30.8), as in :class:`~shmguard.model.Location`;
  columns count Unicode code points, so the run sets ``columnKind: unicodeCodePoints``
  (3.14.17). ``byteOffset``/``byteLength`` (3.30.11, 3.30.12) are the finding's byte span in the
  file as read, the span ``--fix`` edits.
* ``fixes`` (3.55): a finding whose fix has edits and is ``safe`` or ``unsafe`` carries one fix,
  each edit a ``replacement`` (3.57) whose ``deletedRegion`` is the edit's byte span (zero-length
  for an insertion) and whose ``insertedContent`` is its text; ``properties.applicability`` says
  which (``--fix`` applies only ``safe``).
* ``logicalLocations`` (3.33) hold the YAML path (``services.train.shm_size``).
* ``partialFingerprints`` (3.27.17) ``shmguard/v1`` is the line-number-free fingerprint of
  ``--baseline`` (:func:`shmguard.lint.baseline.fingerprint`), when the file's bytes are given.
* A file that could not be read is a ``toolExecutionNotification`` (3.58) of the invocation
  (3.20), which is then not ``executionSuccessful``.

Artifact URIs: a relative path stays relative (``/`` separated, percent-encoded: GitHub resolves
it against the repository root); an absolute one becomes a ``file://`` URI; ``-`` (standard
input) stays ``-``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from shmguard._version import __version__
from shmguard.lint.baseline import fingerprint
from shmguard.lint.check import FileResult
from shmguard.lint.docs import render_rules_markdown
from shmguard.lint.engine import Rule
from shmguard.model.finding import Applicability, Finding, Location, Severity
from shmguard.sources.diagnostics import SourceDiagnostic

__all__ = ["SARIF_SCHEMA", "sarif_log"]

#: The ``$schema`` of the log: the OASIS URI of the SARIF 2.1.0 (errata 01) schema.
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(file: str) -> str:
    if file == "-":
        return "-"
    posix = PurePath(file).as_posix()
    if PurePath(file).is_absolute():
        return "file://" + quote(posix if posix.startswith("/") else "/" + posix)
    return quote(posix)


def _descriptor(rule: Rule[Any, Any]) -> dict[str, Any]:
    markdown = render_rules_markdown([rule], intro="").split("\n## ", 1)[1]
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": re.sub(r"\s+", " ", rule.doc.what).strip()},
        "help": {"text": f"{rule.why} Fix: {rule.doc.fix}", "markdown": "## " + markdown},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": list(rule.targets), "fix": rule.fix.value},
    }


def _region(loc: Location) -> dict[str, Any] | None:
    region: dict[str, Any] = {}
    if loc.line is not None:
        region["startLine"] = loc.line
        region["startColumn"] = loc.column or 1
        region["endLine"] = loc.end_line or loc.line
        if loc.end_column is not None:
            region["endColumn"] = loc.end_column
    if loc.start is not None and loc.end is not None:
        region["byteOffset"] = loc.start
        region["byteLength"] = loc.end - loc.start
    return region or None


def _location(loc: Location, file: str) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(loc.file or file)}}
    region = _region(loc)
    if region is not None:
        physical["region"] = region
    out: dict[str, Any] = {"physicalLocation": physical}
    if loc.path:
        out["logicalLocations"] = [{"fullyQualifiedName": loc.path, "kind": "element"}]
    return out


def _fixes(f: Finding, file: str) -> list[dict[str, Any]]:
    fix = f.fix
    if fix is None or not fix.edits or fix.applicability is Applicability.DISPLAY_ONLY:
        return []
    uri = _uri(f.location.file if f.location is not None and f.location.file else file)
    replacements = [
        {
            "deletedRegion": {"byteOffset": e.start, "byteLength": e.end - e.start},
            "insertedContent": {"text": e.content},
        }
        for e in fix.edits
    ]
    return [
        {
            "description": {"text": fix.title},
            "artifactChanges": [{"artifactLocation": {"uri": uri}, "replacements": replacements}],
            "properties": {"applicability": fix.applicability.value},
        }
    ]


def _result(f: Finding, file: str, index: Mapping[str, int], data: bytes | None) -> dict[str, Any]:
    out: dict[str, Any] = {"ruleId": f.code}
    if f.code in index:
        out["ruleIndex"] = index[f.code]
    out["level"] = _LEVEL[f.severity]
    out["message"] = {"text": f.message}
    if f.location is not None:
        out["locations"] = [_location(f.location, file)]
    if data is not None:
        out["partialFingerprints"] = {"shmguard/v1": fingerprint(f, data)}
    fixes = _fixes(f, file)
    if fixes:
        out["fixes"] = fixes
    return out


def _notification(d: SourceDiagnostic) -> dict[str, Any]:
    loc = Location(d.file, d.line, d.column)
    return {
        "level": "note" if d.info else "error",
        "message": {"text": f"{d.kind.value}: {d.message}"},
        "locations": [_location(loc, d.file)],
    }


def sarif_log(
    results: Sequence[FileResult],
    rules: Sequence[Rule[Any, Any]],
    *,
    sources: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log (a JSON-ready dict) of ``check``'s results.

    Args:
        results: one per file checked, in order.
        rules: the rules checked, in ``tool.driver.rules`` order (``ruleIndex`` refers to it).
        sources: file path -> the bytes its findings were found in, for
            ``partialFingerprints``; files not in it get none.
    """
    index = {r.code: i for i, r in enumerate(rules)}
    sources = sources or {}
    notes = [_notification(d) for r in results for d in r.diagnostics]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "shmguard",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_descriptor(r) for r in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not any(n["level"] == "error" for n in notes),
                "toolExecutionNotifications": notes,
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": [
            _result(f, r.path, index, sources.get(r.path)) for r in results for f in r.findings
        ],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}

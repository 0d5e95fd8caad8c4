"""A baseline of known findings, so that only new ones fail a check, as Checkov's
``--create-baseline`` / ``--baseline`` do (Checkov's CLI Command Reference,
https://www.checkov.io/2.Basics/CLI%20Command%20Reference.html).

A finding is identified by its file, its code and a *fingerprint* that does not contain line
numbers: a hash of the YAML path of the flagged node (``services.train.shm_size``) and the
flagged text, or, for a ``docker|podman run`` line (which has no path), of the flagged text and
the whole source line it is on. Lines inserted or removed above a finding therefore keep it
known; changing the flagged value, moving the node to another path or renaming the file makes
it new. Equal fingerprints in one file (two identical run lines) are counted: a baseline with
one leaves the second reported.

The file (``shmguard.baseline/1``)::

    {"schema": "shmguard.baseline/1", "version": "0.1.0",
     "findings": [{"file": "deploy/train.yaml", "code": "SHM008",
                   "fingerprint": "5c0e...", "path": "spec.volumes[0].emptyDir.medium",
                   "value": "Memory"}]}

``file`` is the path as given on the command line, with ``/`` separators: create and use a
baseline from the same directory with the same arguments. ``path`` and ``value`` are there for
people reading the file; only ``file``, ``code`` and ``fingerprint`` are compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from shmguard.lint.check import FileResult
from shmguard.model.finding import Finding

__all__ = [
    "SCHEMA",
    "Baseline",
    "BaselineEntry",
    "BaselineError",
    "entries",
    "fingerprint",
    "parse_baseline",
]

#: The ``schema`` value of a baseline file.
SCHEMA = "shmguard.baseline/1"
#: Hex digits of the SHA-256 kept in a fingerprint (64 bits: no collision among a repository's
#: findings in practice, short enough to read).
_DIGITS = 16
#: Characters of the flagged text kept in the readable ``value``.
_VALUE_CHARS = 200


class BaselineError(ValueError):
    """A baseline file that cannot be used (one line naming the file and what is wrong)."""


@dataclass(frozen=True)
class BaselineEntry:
    """One known finding: file (``/`` separated, as given), code, fingerprint, and for
    readers the YAML path (None for run lines) and the flagged text."""

    file: str
    code: str
    fingerprint: str
    path: str | None = None
    value: str = ""


def _file(name: str) -> str:
    return name if name == "-" else PurePath(name).as_posix()


def _flagged(f: Finding, data: bytes) -> tuple[str, str]:
    """(flagged text, its whole source line) of ``f`` in ``data``; empty without a span."""
    loc = f.location
    if loc is None or loc.start is None or loc.end is None:
        return "", ""
    value = data[loc.start : loc.end].decode("utf-8", "replace")
    first = data.rfind(b"\n", 0, loc.start) + 1
    last = data.find(b"\n", loc.start)
    line = data[first : len(data) if last < 0 else last].decode("utf-8", "replace").strip()
    return value, line


def fingerprint(f: Finding, data: bytes) -> str:
    """The line-number-free fingerprint of ``f``, a finding in the file whose bytes are
    ``data``: SHA-256 (first 16 hex digits) of the code, the YAML path and the flagged text,
    plus the flagged source line when there is no path (run lines). Without a byte span the
    message stands in for the text."""
    value, line = _flagged(f, data)
    path = f.location.path if f.location is not None else None
    parts = [f.code, path or "", value or f.message, "" if path else line]
    import hashlib  # here: a run without --baseline needs none of it

    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_DIGITS]


def entries(results: Iterable[tuple[FileResult, bytes]]) -> list[BaselineEntry]:
    """The baseline entries of checked files: each result with the bytes it was checked on."""
    out: list[BaselineEntry] = []
    for result, data in results:
        for f in result.findings:
            value, _ = _flagged(f, data)
            path = f.location.path if f.location is not None else None
            out.append(
                BaselineEntry(
                    _file(result.path), f.code, fingerprint(f, data), path, value[:_VALUE_CHARS]
                )
            )
    return out


@dataclass(frozen=True)
class Baseline:
    """Known findings: (file, code, fingerprint) -> how many times each was recorded."""

    known: Mapping[tuple[str, str, str], int]

    @classmethod
    def of(cls, items: Iterable[BaselineEntry]) -> Baseline:
        """A baseline holding ``items``."""
        return cls(Counter((e.file, e.code, e.fingerprint) for e in items))

    def new_findings(self, result: FileResult, data: bytes) -> tuple[FileResult, int]:
        """``result`` without the findings the baseline knows, and how many were dropped."""
        left = Counter(self.known)
        kept: list[Finding] = []
        for f in result.findings:
            key = (_file(result.path), f.code, fingerprint(f, data))
            if left[key] > 0:
                left[key] -= 1
            else:
                kept.append(f)
        return replace(result, findings=tuple(kept)), len(result.findings) - len(kept)


def parse_baseline(text: str, name: str) -> Baseline:
    """Read a baseline file's text (``name`` for messages).

    Raises:
        BaselineError: not JSON, another schema, or an entry without file/code/fingerprint.
    """
    import json

    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as err:
        raise BaselineError(f"{name}: not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise BaselineError(f"{name}: not a shmguard baseline (schema {SCHEMA} expected)")
    items = doc.get("findings")
    if not isinstance(items, list):
        raise BaselineError(f"{name}: findings: must be a list")
    out: list[BaselineEntry] = []
    for i, item in enumerate(items):
        keys = ("file", "code", "fingerprint")
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in keys):
            raise BaselineError(f"{name}: findings[{i}]: needs file, code and fingerprint strings")
        out.append(BaselineEntry(item["file"], item["code"], item["fingerprint"]))
    return Baseline.of(out)

"""Text output of ``shmguard check``: one line per finding, a fix hint, diagnostics and diffs.

``file:line:col: CODE [severity] message`` (the shape compilers, ruff and yamllint print, so
editors and CI jump to it), then ``  fix (safe|unsafe|display-only): title``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from shmguard.lint.sources.diagnostics import SourceDiagnostic
from shmguard.model.finding import Finding


def _where(file: str, line: int | None, col: int | None) -> str:
    if line is None:
        return file
    return f"{file}:{line}:{col or 1}"


def finding_lines(f: Finding) -> list[str]:
    """The finding's line and, when it has a fix, the hint line."""
    loc = f.location
    where = _where(loc.file or "-", loc.line, loc.column) if loc is not None else "-"
    out = [f"{where}: {f.code} [{f.severity.value}] {f.message}"]
    if f.fix is not None:
        how = f.fix.applicability.value if f.fix.edits else "display-only"
        out.append(f"  fix ({how}): {f.fix.title}")
    return out


def diagnostic_line(d: SourceDiagnostic) -> str:
    """``file:line:col: <kind>: message`` for a file (or part of one) that could not be read."""
    level = "info" if d.info else "error"
    return f"{_where(d.file, d.line, d.column)}: {level}: {d.kind.value}: {d.message}"


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """A unified diff of ``old`` -> ``new`` with ``a/`` and ``b/`` names, line endings kept."""
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}"))


def summary_line(findings: Iterable[Finding], files: int, fixed: int, baselined: int = 0) -> str:
    """``N findings (E errors, W warnings, I info) in F files[; X fixed][; B in the baseline]``
    (``baselined``: findings left out because ``--baseline`` knows them)."""
    fs = list(findings)
    counts = {s: sum(f.severity.value == s for f in fs) for s in ("error", "warning", "info")}
    text = (
        f"{len(fs)} finding{'s' if len(fs) != 1 else ''} ({counts['error']} errors, "
        f"{counts['warning']} warnings, {counts['info']} info) in {files} file"
        f"{'s' if files != 1 else ''}"
    )
    text += f"; {fixed} fixed" if fixed else ""
    return text + (f"; {baselined} in the baseline" if baselined else "")

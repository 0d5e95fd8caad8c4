"""Text output of ``shmguard check``: one line per finding, a fix hint, diagnostics and diffs.

``file:line:col: CODE [severity] message`` (the shape compilers, ruff and yamllint print, so
editors and CI jump to it), then ``  fix (safe|unsafe|display-only): title``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from shmguard.model.finding import Finding
from shmguard.render.escape import printable
from shmguard.render.words import plural, severity_counts
from shmguard.sources.diagnostics import SourceDiagnostic


def _where(file: str, line: int | None, col: int | None) -> str:
    file = printable(file)
    if line is None:
        return file
    return f"{file}:{line}:{col or 1}"


def finding_lines(f: Finding) -> list[str]:
    """The finding's line and, when it has a fix, the hint line."""
    loc = f.location
    where = _where(loc.file or "-", loc.line, loc.column) if loc is not None else "-"
    if loc is not None and loc.line is None and loc.path:
        where += f" {printable(loc.path)}"  # read from a cluster: no lines, a field path
    out = [f"{where}: {f.code} [{f.severity.value}] {printable(f.message)}"]
    if f.fix is not None:
        how = f.fix.applicability.value if f.fix.edits else "display-only"
        out.append(f"  fix ({how}): {printable(f.fix.title)}")
    return out


def diagnostic_line(d: SourceDiagnostic, *, level: bool = True) -> str:
    """``file:line:col: <level>: <kind>: message`` for a file (or part of one) that could not
    be read; without ``level`` the ``error:``/``info:`` word is left to the caller (the CLI's
    ``shmguard: error:`` prefix says it once)."""
    where = _where(d.file, d.line, d.column)
    message = printable(d.message)
    if not level:
        return f"{where}: {d.kind.value}: {message}"
    return f"{where}: {'info' if d.info else 'error'}: {d.kind.value}: {message}"


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """A unified diff of ``old`` -> ``new`` with ``a/`` and ``b/`` names, line endings kept; a
    last line without one is followed by GNU diff's ``\\ No newline at end of file`` line (so
    ``patch`` and ``git apply`` take the diff, and the next line does not run into it)."""
    # lines end at "\n", as GNU diff's and patch's do (str.splitlines also splits at a lone
    # "\r", "\x85" or U+2028, which patch would not find)
    a = _LINE.findall(old.decode("utf-8", "replace"))
    b = _LINE.findall(new.decode("utf-8", "replace"))
    shown = printable(path)
    lines = difflib.unified_diff(a, b, f"a/{shown}", f"b/{shown}")
    return "".join(x if x.endswith("\n") else f"{x}\n{NO_NEWLINE}\n" for x in lines)


#: A line and its "\n" (the last may have none).
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
#: What GNU diff writes after a last line that has no line ending.
NO_NEWLINE = "\\ No newline at end of file"


def summary_line(
    findings: Iterable[Finding],
    files: int,
    fixed: int,
    baselined: int = 0,
    *,
    written: bool = True,
    skipped: Mapping[str, int] | None = None,
    unread: int = 0,
) -> str:
    """``N findings (E errors, W warnings, I info) in F files[; U files with errors (on
    stderr)][; X fixed][; B in the baseline][; S files skipped: binary 9, too large 3]``
    (``unread``: of the ``files``, those that could not be read or written, which the count of
    files checked leaves out; ``baselined``: findings left out because ``--baseline`` knows
    them; ``skipped``: reason -> files a walk did not check). With ``written`` False
    (``--diff``) the fixes are ``X fixable (not written: --diff)``."""
    fs = list(findings)
    checked = max(files - unread, 0)
    text = f"{plural(len(fs), 'finding')} ({severity_counts(fs)}) in {plural(checked, 'file')}"
    if unread:
        text += f"; {plural(unread, 'file')} with errors (on stderr)"
    if fixed:
        text += f"; {fixed} fixed" if written else f"; {fixed} fixable (not written: --diff)"
    text += f"; {baselined} in the baseline" if baselined else ""
    if skipped:
        why = ", ".join(f"{_SKIP_WORDS.get(k, k)} {n:,}" for k, n in skipped.items())
        text += f"; {plural(sum(skipped.values()), 'file')} skipped: {why}"
    return text


#: ``check``'s skip reasons (:attr:`shmguard.lint.report.CheckReport.skipped`) in words.
_SKIP_WORDS = {"too-large": "too large", "not-utf8": "not UTF-8", "fifo": "FIFO"}


def fixed_line(f: Finding) -> str:
    """``fixed: file:line:col: CODE title`` for a finding ``--fix`` repaired (its position in
    the file as it was before the fix)."""
    loc = f.location
    where = _where(loc.file or "-", loc.line, loc.column) if loc is not None else "-"
    title = f" ({printable(f.fix.title)})" if f.fix is not None else ""
    return f"fixed: {where}: {f.code}{title}"

"""GitHub Actions annotations of ``shmguard check`` (``--format github``).

One workflow command per finding, which the Actions runner turns into an annotation on the
file and line of the pull request (GitHub Docs, "Workflow commands for GitHub Actions",
https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands,
"Setting an error message" / "warning" / "notice")::

    ::error file=deploy/train.yaml,line=21,endLine=21,col=34,endColumn=40,title=SHM006::message

* The command is ``error``, ``warning`` or ``notice`` (for ``info``).
* ``col``/``endColumn`` are sent only when the finding starts and ends on one line: the
  annotation API refuses columns on a multi-line range (actions/toolkit
  ``packages/core/src/core.ts`` ``AnnotationProperties``: "Cannot be sent when startLine and
  endLine are different values"; ruff does the same since astral-sh/ruff#22074).
  ``endColumn`` is the column after the flagged text, as in the text output and as ruff's
  ``--output-format github`` writes it.
* Escaping is the runner's own (actions/toolkit ``packages/core/src/command.ts``
  ``escapeData``/``escapeProperty``): in the message ``%`` -> ``%25``, CR -> ``%0D``,
  LF -> ``%0A``; in property values also ``:`` -> ``%3A`` and ``,`` -> ``%2C``.
* The message is the finding's message, then the fix hint on a new line, as the text output
  prints it.
"""

from __future__ import annotations

from shmguard.model.finding import Finding, Location, Severity
from shmguard.sources.diagnostics import SourceDiagnostic

__all__ = ["annotation", "diagnostic_annotation", "escape_data", "escape_property"]

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    """Escape a workflow command's message: ``%``, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value: as :func:`escape_data`, plus ``:``, ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _properties(loc: Location | None, file: str, title: str) -> str:
    props: list[tuple[str, object]] = [("file", (loc.file if loc else None) or file)]
    if loc is not None and loc.line is not None:
        end_line = loc.end_line or loc.line
        props += [("line", loc.line), ("endLine", end_line)]
        if loc.column is not None and end_line == loc.line:
            props.append(("col", loc.column))
            if loc.end_column is not None:
                props.append(("endColumn", loc.end_column))
    props.append(("title", title))
    return ",".join(f"{k}={escape_property(str(v))}" for k, v in props)


def annotation(f: Finding, file: str) -> str:
    """The workflow command of one finding of ``file`` (the finding's own file wins)."""
    text = f.message
    if f.fix is not None:
        how = f.fix.applicability.value if f.fix.edits else "display-only"
        text += f"\nfix ({how}): {f.fix.title}"
    return f"::{_COMMAND[f.severity]} {_properties(f.location, file, f.code)}::{escape_data(text)}"


def diagnostic_annotation(d: SourceDiagnostic) -> str:
    """The workflow command of a file (or part of one) that could not be read: ``error``, or
    ``notice`` for an informational one (an unrendered template skipped)."""
    loc = Location(d.file, d.line, d.column)
    command = "notice" if d.info else "error"
    props = _properties(loc, d.file, f"shmguard: {d.kind.value}")
    return f"::{command} {props}::{escape_data(d.message)}"

"""Text rendering of an ``explain`` diagnosis on a Rich console (colour only where the console
allows it; NO_COLOR is honoured by :func:`shmguard.cli._common.console`).

Log text is never interpreted as Rich markup: every piece of it goes through
:class:`rich.text.Text`; its control characters are escaped (render/escape.py), so a log line
holding ``\x1b[2J`` or ``\n::error::`` prints as text on its own line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shmguard.fix.snippets import render_snippets
from shmguard.render.escape import printable
from shmguard.render.words import plural
from shmguard.triage.model import Diagnosis, FixPlan, Result
from shmguard.units import format_iec

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {"high": "bold red", "medium": "bold yellow", "low": "dim"}
_FACT_NAMES = {
    "shm_total": "/dev/shm size",
    "shm_avail": "/dev/shm free",
    "mem_limit": "memory limit",
}
#: Runtimes shown in text when the log does not say which one (JSON has all five).
_DEFAULT_TEXT_RUNTIMES = ("docker", "compose", "kubernetes")


def render(
    d: Diagnosis,
    console: Console,
    *,
    evidence: int = 3,
    show_exit: bool = True,
    runtime_from: str = "--runtime",
) -> None:
    """Write the diagnosis to ``console``: header, ranked causes with evidence and fixes, the
    order of shm and OOM failures, consequences, and what to capture next. ``show_exit``:
    end the result line with the exit status (off for one file of ``--per-file``, whose
    summary gives the status). ``runtime_from``: where a runtime given by the caller came
    from (``run --watch`` passes the one it detected where the command ran)."""
    from rich.text import Text

    def line(*parts: tuple[str, str] | str, indent: int = 0) -> None:
        t = Text(" " * indent)
        for p in parts:  # log lines and file names: control characters escaped
            if isinstance(p, tuple):
                t.append(printable(p[0]), style=p[1])
            else:
                t.append(printable(p))
        # No wrapping: evidence and commands stay whole lines (grep-able, copy-able).
        console.print(t, soft_wrap=True)

    names = ", ".join(
        f"{i.name} ({plural(i.lines, 'line')}, {format_iec(i.bytes)}"
        f"{', binary' if i.binary else ''})"
        for i in d.inputs
    )
    line(("shmguard explain", "bold"), f": {names or 'no input'}")
    if d.runtime_source == "flag":
        line(f"Runtime: {d.runtime} (from {runtime_from})")
    elif d.runtime is not None:
        line(runtime_line(d))
    for note in d.notes:
        line(("Note: ", "bold"), note)
    if d.facts:
        facts = " · ".join(
            f"{_FACT_NAMES.get(f.name, f.name)} {format_iec(f.bytes)} (line {f.line})"
            for f in d.facts
        )
        line(f"The log shows: {facts}")

    causes = [r for r in d.results if r.role == "cause" and r.explained_by is None]
    info = [r for r in d.results if r.role == "info"]
    consequences = [r for r in d.results if r.explained_by is not None]

    if not causes:
        line("")
        line(
            ("No known failure cause matched", "bold"),
            f" ({d.signatures_loaded} signatures checked).",
        )
    full = any(r.confidence != "low" for r in causes)
    # A runtime the log only hints at: its snippet and sentence lead the others.
    hint = d.runtime if d.runtime_source == "log" and d.runtime_confidence == "low" else None
    printed: dict[tuple[object, ...], int] = {}
    for n, r in enumerate(causes, 1):
        line("")
        # Low-confidence possibilities get no snippets when a likelier cause was found.
        compact = full and r.confidence == "low"
        _result(r, n, line, evidence, printed, compact, hint)

    for r in info:
        line("")
        line(("Note: ", "bold"), r.title, f"  [{r.id}]")
        for para in _paragraphs(r.cause):
            line(para, indent=3)
        _evidence(r, line, evidence)

    for s in d.sequence:
        line("")
        line(("Order: ", "bold"), s.meaning)

    if consequences:
        line("")
        line(("Also matched, explained by the causes above:", "bold"))
        for r in consequences:
            first = r.evidence[0] if r.evidence else None
            where = f" (line {first.line})" if first else ""
            line(f"- {r.title}{where}: a consequence of {r.explained_by}", indent=2)

    if d.next_steps:
        line("")
        line(("What to capture next:", "bold"))
        for step in d.next_steps:
            line(f"- {step}", indent=2)

    line("")
    strong = sum(1 for r in causes if r.confidence in ("medium", "high"))
    status = f" (exit {d.exit_code})" if show_exit else ""
    if d.exit_code:
        noun = "cause" if strong == 1 else "causes"
        line(f"Result: {strong} {noun} of medium confidence or more{status}.")
    else:
        line(f"Result: no cause of medium confidence or more{status}.")


def render_file_heading(name: str, console: Console, *, first: bool) -> None:
    """The line that opens one file's section with ``--per-file``: ``==> NAME <==`` (the
    heading ``head`` and ``tail`` print between files), after a blank line unless first."""
    from rich.text import Text

    if not first:
        console.print()
    console.print(Text(f"==> {printable(name)} <=="), soft_wrap=True)


#: A file's top cause in the ``--per-file`` summary: (confidence, title, signature id).
TopCause = tuple[str, str, str]


def top_cause_row(r: Result | None) -> TopCause | None:
    """What the ``--per-file`` summary keeps of a file's top cause (a few shared strings, so
    the summary of thousands of files stays small)."""
    return None if r is None else (r.confidence, r.title, r.id)


def render_per_file_summary(
    rows: Sequence[tuple[str, TopCause | None, str | None]],
    exit_code: int,
    console: Console,
    *,
    first: bool = False,
) -> None:
    """The closing table of ``--per-file``: one line per input in the order given, with its
    top cause (``rows``: name, :func:`top_cause_row` or None, and the error when it could not
    be read), then the counts and the exit status; after a blank line unless ``first`` (no
    file section was printed before it)."""
    from rich.text import Text

    width = min(max((len(n) for n, _, _ in rows), default=0), 60)
    strong = sum(1 for _, r, e in rows if e is None and r is not None and r[0] != "low")
    failed = sum(1 for _, _, e in rows if e is not None)
    if not first:
        console.print()
    console.print(Text("Summary, per file:", style="bold"), soft_wrap=True)
    for name, top, err in rows:
        t = Text(f"  {printable(name).ljust(width)}  ")
        if err is not None:
            t.append("not read: ", style="bold red")
            t.append(printable(err))
        elif top is None:
            t.append("no known cause")
        else:
            confidence, title, sig_id = top
            t.append(f"[{confidence.upper()}]", style=_STYLE[confidence])
            t.append(f" {printable(title)}  [{sig_id}]")
        console.print(t, soft_wrap=True)
    files = "file" if len(rows) == 1 else "files"
    parts = [f"{strong} of {len(rows)} {files} with a cause of medium confidence or more"]
    if failed:
        parts.append(f"{failed} not read")
    console.print(Text(f"Result: {', '.join(parts)} (exit {exit_code})."), soft_wrap=True)


def runtime_line(d: Diagnosis, shown: int = 2, width: int = 80) -> str:
    """The ``Runtime:`` line for a runtime read from the log, with the lines that show it:
    ``Runtime: kubernetes (from line 12: `Warning  Evicted  12m  kubelet  ...`)``. Up to
    ``shown`` evidence lines, each cut to ``width`` characters; several inputs name the file.
    A runtime the log only hints at says so, and that fixes for the others follow."""
    many = len(d.inputs) > 1
    parts = []
    for ev in d.runtime_evidence[:shown]:
        text = ev.text if len(ev.text) <= width else ev.text[: width - 1].rstrip() + "…"
        where = f"{ev.file} line {ev.line}" if many else f"line {ev.line}"
        parts.append(f"{where}: `{text}`")
    src = f"from {'; '.join(parts)}" if parts else "from the log"
    if d.runtime_confidence == "low":
        return f"Runtime: {d.runtime}, a hint only ({src}); its fix comes first, the others follow"
    return f"Runtime: {d.runtime} ({src})"


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def _evidence(r: Result, line: Any, limit: int) -> None:
    shown = r.evidence[:limit]
    more = r.matches - len(shown)
    head = f"Evidence ({len(shown)} of {r.matches} lines):" if more > 0 else "Evidence:"
    line((head, "bold"), indent=3)
    for ev in shown:
        line((f"{ev.file}:{ev.line}", "cyan"), "  ", ev.text, indent=5)


def _result(
    r: Result,
    n: int,
    line: Any,
    limit: int,
    printed: dict[tuple[object, ...], int],
    compact: bool,
    hint: str | None = None,
) -> None:
    line(
        f"{n}. ",
        (f"[{r.confidence.upper()}]", _STYLE[r.confidence]),
        " ",
        (r.title, "bold"),
        f"  [{r.id}]",
    )
    for i, para in enumerate(_paragraphs(r.cause)):
        line(("Cause: ", "bold") if i == 0 else "", para, indent=3)
    for note in r.notes:
        line(("Note: ", "bold"), note, indent=3)
    if r.decide:
        line(("What would decide: ", "bold"), " ".join(r.decide.split()), indent=3)
    _evidence(r, line, limit)
    if r.fix is not None:
        if compact:
            line(("If so: ", "bold"), r.fix.summary, indent=3)
        else:
            _fix(r.fix, n, line, printed, hint)
    if r.references:
        line(("References: ", "bold"), "; ".join(r.references), indent=3)


def _fix(
    f: FixPlan,
    n: int,
    line: Any,
    printed: dict[tuple[object, ...], int],
    hint: str | None = None,
) -> None:
    """Print a fix; sizes, snippets and steps already printed for an earlier cause are
    referred to instead of repeated. ``hint``: a runtime the log only hints at, shown first
    among those of an unknown runtime."""
    shown_runtimes = (*((hint,) if hint else ()), *_DEFAULT_TEXT_RUNTIMES)
    line(("Fix: ", "bold green"), f.summary, indent=3)
    all_snippets = render_snippets(f.changes) if f.changes else ()
    key: tuple[object, ...] = ("snippets", f.shm_size.bytes if f.shm_size else None, f.changes)
    if all_snippets and key in printed:
        line(f"Size and configuration: as for {printed[key]} above.", indent=5)
    elif f.shm_size is not None:
        printed[key] = n
        line(f"Size: {format_iec(f.shm_size.bytes)}, {f.shm_size.basis}.", indent=5)
        if f.memory_limit is not None:
            line(
                f"Memory limit: {format_iec(f.memory_limit)} (the room the limit the log shows "
                "left the job, plus the shm size: tmpfs pages count against the limit).",
                indent=5,
            )
        snippets = all_snippets
        if f.runtime is None:
            snippets = tuple(s for s in snippets if s.runtime in shown_runtimes)
            if snippets and hint:
                line(f"The log only hints at {hint}; pick yours (or pass --runtime):", indent=5)
            elif snippets:
                line(
                    "The log does not say which runtime; pick yours (or pass --runtime):", indent=5
                )
        for s in snippets:
            line((f"{s.title}:", "bold"), indent=5)
            for text in s.text.splitlines():
                line((text, "green"), indent=7)
    notes = [
        note
        for note in f.runtime_notes
        if not (f.runtime is None and note.split(":", 1)[0] not in shown_runtimes)
    ]
    steps = [t for t in (*notes, *f.app, *f.next) if ("step", t) not in printed]
    for t in steps:
        printed[("step", t)] = n
    fresh_notes = [t for t in notes if t in steps]
    fresh_app = [t for t in f.app if t in steps]
    fresh_next = [t for t in f.next if t in steps]
    for note in fresh_notes:
        line(note, indent=5)
    if fresh_app:
        line(("Application side:", "bold"), indent=5)
        for step in fresh_app:
            line(f"- {step}", indent=7)
    for step in fresh_next:
        line(("Next: ", "bold"), step, indent=5)

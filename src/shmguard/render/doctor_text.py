"""`shmguard doctor` as text for humans: a Rich report, or a one-screen ``--brief`` banner.

Returns Rich renderables; the CLI prints them on a console that honours NO_COLOR. Imported only
on the text path (Rich costs tens of milliseconds to import).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import DoctorReport
from shmguard.model import Fact, FailOn, Finding, Severity
from shmguard.model.host import HostFacts
from shmguard.render.escape import printable
from shmguard.render.parts import Part
from shmguard.render.parts import print_parts as print_parts  # re-exported: it lived here
from shmguard.render.words import plural, severity_counts
from shmguard.units import format_iec

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _size(fact: Fact[int], none: str = "none") -> str:
    if fact.reason is not None:
        return f"unknown ({fact.reason})"
    return none if fact.value is None else format_iec(fact.value)


def _count(fact: Fact[int], none: str = "unlimited") -> str:
    if fact.reason is not None:
        return f"unknown ({fact.reason})"
    return none if fact.value is None else str(fact.value)


def _shm_line(facts: HostFacts) -> str:
    shm = facts.shm
    if shm.exists.value is None:
        return f"unknown ({shm.exists.reason})"
    if not shm.exists.value:
        return "missing"
    parts = []
    kind = shm.fstype.value or f"unknown filesystem ({shm.fstype.reason})"
    size_opt = next((o for o in shm.options.value or () if o.startswith("size=")), None)
    sizing = {"kernel-default": "no size=: half of RAM", "unlimited": "size=0: no limit"}.get(
        shm.sizing.value or "", size_opt or ""
    )
    parts.append(f"{_size(shm.total)} {kind}" + (f" ({sizing})" if sizing else ""))
    if shm.used.value is not None and shm.total.value:
        pct = 100 * shm.used.value / shm.total.value
        parts.append(f"used {format_iec(shm.used.value)} ({pct:.0f}%)")
        parts.append(f"free {format_iec(shm.free.value or 0)}")
    if shm.default_of.value:
        parts.append("the default size of " + ", ".join(shm.default_of.value))
    if shm.real_path != shm.path:
        parts.append(f"a symlink to {shm.real_path}")
    if shm.mount_point.value and shm.mount_point.value != shm.real_path:
        parts.append(f"not a mount point (on {shm.mount_point.value})")
    return " · ".join(parts)


def _holders_line(facts: HostFacts) -> str:
    held = facts.holders.value
    if held is None:
        return f"unknown ({facts.holders.reason})"
    unheld = sum(f.bytes for f in held.unheld)
    # By program: torch, nccl, chromium, postgres, mpi, ucx... (inspect.holders.KINDS).
    kinds = ", ".join(f"{k} {format_iec(v)}" for k, v in held.by_kind.items() if v)
    if not held.processes and not held.unheld:
        line = "no process holds /dev/shm files"
    elif not held.processes:
        line = f"no process holds /dev/shm files; {len(held.unheld)} named file(s) hold"
        line += f" {format_iec(unheld)}" + (f" ({kinds})" if kinds else "")
    else:
        top = sorted(held.processes, key=lambda p: -p.bytes)[:3]
        procs = ", ".join(f"pid {p.pid} {p.name} {format_iec(p.bytes)}" for p in top)
        line = f"{format_iec(held.total_bytes)} held ({kinds or 'empty files'}): {procs}"
        if held.unheld:
            line += f"; {format_iec(unheld)} in named files no process holds"
    if held.errors:
        line += f" · {len(held.errors)} unreadable ({held.errors[0]})"
    return line


def _add(grid: Table, key: str, value: str) -> None:
    """A facts row; the value (paths, process names, reasons read from the host) escaped
    (render/escape.py)."""
    grid.add_row(key, printable(value))


def facts_table(facts: HostFacts) -> Table:
    """The facts as a two-column grid."""
    cg = facts.cgroup
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")  # a long path folds, never cut with "…"
    runtime = facts.runtime
    _add(
        grid,
        "runtime",
        runtime.name + (f" ({'; '.join(runtime.evidence)})" if runtime.evidence else ""),
    )
    _add(grid, "/dev/shm", _shm_line(facts))
    version = f"cgroup v{cg.version.value}" if cg.version.value else "cgroup unknown"
    _add(
        grid,
        "memory",
        f"{version}{' (hybrid)' if cg.mode == 'hybrid' else ''} · "
        f"limit {_size(cg.memory_limit)} · "
        f"in use {_size(cg.memory_current)} · shm charged {_size(cg.shmem)} · "
        f"OOM kills {_count(cg.oom_kills, 'none')}",
    )
    mem = facts.memory
    _add(
        grid,
        "host",
        f"RAM {_size(mem.total)} · available {_size(mem.available)} · swap {_size(mem.swap_total)}",
    )
    quota = cg.cpu_quota
    quota_text = (
        f"unknown ({quota.reason})"
        if quota.reason
        else "none"
        if quota.value is None
        else f"{quota.value:g}"
    )
    _add(grid, "CPUs", f"quota {quota_text} · cpuset {_count(cg.cpuset)}")
    lim = facts.limits
    _add(
        grid,
        "limits",
        f"nofile {_count(lim.nofile_soft)}/{_count(lim.nofile_hard)} · memlock "
        f"{_size(lim.memlock_soft, 'unlimited')}/{_size(lim.memlock_hard, 'unlimited')}",
    )
    sysv = facts.sysv
    _add(
        grid,
        "SysV shm",
        f"unknown ({sysv.reason})"
        if sysv.value is None
        else f"{plural(sysv.value.segments, 'segment')}, {format_iec(sysv.value.bytes)}",
    )
    _add(grid, "holders", _holders_line(facts))
    leftovers = facts.shm.leftovers.value
    if leftovers:
        _add(grid, "leftovers", f"{len(leftovers)} zero-block torch_* files")
    gpus = facts.gpus
    _add(
        grid,
        "GPUs",
        f"unknown ({gpus.reason})"
        if gpus.value is None
        else f"{len(gpus.value.gpus)} (driver {gpus.value.driver})"
        + "".join(f" · {g.name} {format_iec(g.memory_total)}" for g in gpus.value.gpus),
    )
    torch = facts.torch
    _add(
        grid,
        "torch",
        f"{torch.reason}"
        if torch.value is None
        else f"{torch.value.version} · sharing strategy {torch.value.sharing_strategy}",
    )
    for note in cg.notes:
        _add(grid, "note", note)
    return grid


def _snippet(text: str, indent: int) -> Text:
    return Text(textwrap.indent(text, " " * indent), style="green")


def _finding(f: Finding, *, snippets: bool = True) -> list[Part]:
    head = Text()
    head.append(f"{f.severity.value.upper():7} ", style=_STYLE[f.severity])
    head.append(f"{f.code} ", style="bold")
    head.append(printable(f.name))
    body: list[RenderableType] = [head, Padding(Text(printable(f.message)), (0, 0, 0, 8))]
    if f.why:
        body.append(Padding(Text("why: " + printable(f.why), style="dim"), (0, 0, 0, 8)))
    parts: list[Part] = []
    if f.fix is not None:
        body.append(Padding(Text("fix: " + printable(f.fix.description)), (0, 0, 0, 8)))
        parts.append((Group(*body), False))
        if snippets:
            for s in fix_snippets(f.fix):
                parts.append((Padding(Text(f"# {s.title}", style="dim"), (0, 0, 0, 10)), False))
                parts.append((_snippet(s.text, 10), True))
        return parts
    return [(Group(*body), False)]


def _summary(findings: Iterable[Finding], fail_on: FailOn, code: int) -> Text:
    text = f"{severity_counts(findings)} · exit {code} (--fail-on {fail_on.value})"
    return Text(text, style="bold")


def report_parts(report: DoctorReport, fail_on: FailOn, code: int) -> list[Part]:
    """The full report as parts to print in order (see :data:`Part`): facts, then each
    finding with why and fix snippets, then a summary."""
    parts: list[Part] = [
        (Text("shmguard doctor", style="bold"), False),
        (facts_table(report.facts), False),
        (Text(""), False),
    ]
    if not report.findings:
        parts.append((Text("No problems found.", style="green"), False))
    for f in report.findings:
        parts += [*_finding(f), (Text(""), False)]
    parts.append((_summary(report.findings, fail_on, code), False))
    return parts


def brief_parts(
    report: DoctorReport, fail_on: FailOn, code: int, *, summary: str | None = None
) -> list[Part]:
    """A one-screen banner (the /dev/shm line, one line per finding, the summary), then the
    first fix and its first snippet below the panel, verbatim. ``summary`` replaces the
    summary's ``exit N (--fail-on ...)`` (``shmguard run``, whose status is not doctor's)."""
    worst = max((f.severity for f in report.findings), key=lambda s: s.rank, default=None)
    style = _STYLE[worst] if worst is not None else "green"
    lines: list[RenderableType] = [Text("/dev/shm: " + printable(_shm_line(report.facts)))]
    for f in report.findings:
        line = Text()
        line.append(f"{f.severity.value.upper():7} ", style=_STYLE[f.severity])
        line.append(f"{f.code} ", style="bold")
        line.append(printable(f.message))
        lines.append(line)
    if summary is None:
        lines.append(_summary(report.findings, fail_on, code))
    else:
        lines.append(Text(f"{severity_counts(report.findings)} · {summary}", style="bold"))
    title = "shmguard doctor: " + ("OK" if worst is None else f"{worst.value}s found")
    parts: list[Part] = [
        (Panel(Group(*lines), title=title, border_style=style, expand=False), False)
    ]
    first = next((f.fix for f in report.findings if fix_snippets(f.fix)), None)
    if first is not None:
        parts.append((Text("fix: " + printable(first.description)), False))
        parts.append((_snippet(fix_snippets(first)[0].text, 2), True))
    return parts


def render_report(report: DoctorReport, fail_on: FailOn, code: int) -> RenderableType:
    """:func:`report_parts` as one renderable (snippets wrap with the rest; the CLI prints
    the parts with :func:`print_parts` instead)."""
    return Group(*(r for r, _ in report_parts(report, fail_on, code)))


def render_brief(report: DoctorReport, fail_on: FailOn, code: int) -> RenderableType:
    """:func:`brief_parts` as one renderable."""
    return Group(*(r for r, _ in brief_parts(report, fail_on, code)))

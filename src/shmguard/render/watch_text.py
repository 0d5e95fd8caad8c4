"""``shmguard watch`` output: the live Rich view, the plain lines of ``--once``, the stall
report and the JSON body (``shmguard.watch/1``, schemas/watch.schema.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shmguard.fix.snippets import render_snippets
from shmguard.model.fix import shm_changes
from shmguard.monitor.watch import STALLED, WatchSnapshot
from shmguard.render.escape import printable
from shmguard.render.words import plural
from shmguard.units import format_iec

if TYPE_CHECKING:
    from rich.console import RenderableType

#: Eight levels, lowest first (U+2581..U+2588).
_BARS = "▁▂▃▄▅▆▇█"
#: Owner kinds the view lists, in order (``semaphore`` as measure, doctor and the exporter
#: name it; the other programs' kinds, such as chromium or postgres, count as "other" there).
OWNER_KINDS = ("torch", "nccl", "psm", "plasma", "semaphore", "other")


def sparkline(values: tuple[int, ...], top: int) -> str:
    """One character per value, its height ``value / top`` in eight steps (``top`` <= 0: the
    highest value is the top); empty for no values."""
    if not values:
        return ""
    top = top if top > 0 else max(max(values), 1)
    last = len(_BARS) - 1
    return "".join(_BARS[min(max(round(v / top * last), 0), last)] for v in values)


def owners(snap: WatchSnapshot) -> dict[str, int]:
    """Bytes per listed owner kind (every kind not listed folded into ``other``)."""
    got = dict(snap.owners)
    out = {k: got.get(k, 0) for k in OWNER_KINDS}
    out["other"] += sum(v for k, v in got.items() if k not in OWNER_KINDS)
    return out


def fix_lines(snap: WatchSnapshot) -> list[str]:
    """The fix for a full /dev/shm: the size and how it was chosen, then a Docker and a
    Kubernetes snippet; empty without a size."""
    if snap.fix_size is None:
        return []
    size = snap.fix_size
    lines = [f"fix: give /dev/shm {format_iec(size.bytes)} ({size.basis})"]
    for s in render_snippets(shm_changes(size.bytes), ("docker", "kubernetes")):
        lines += [f"  {s.title}:", *(f"    {line}" for line in s.text.splitlines())]
    return lines


def stall_lines(snap: WatchSnapshot) -> list[str]:
    """The stall report: the headline, the evidence with numbers, the fix; empty when the
    verdict did not fire."""
    if not snap.stalled:
        return []
    return [STALLED, *(f"  {printable(e)}" for e in snap.stall.evidence), *fix_lines(snap)]


def _size(n: int | None) -> str:
    return "-" if n is None else format_iec(n)


def summary_lines(snap: WatchSnapshot) -> list[str]:
    """The state in plain lines (``--once`` text, and the view's content)."""
    pct = 100 * snap.used_fraction
    lines = [
        f"{snap.target} ({snap.path}): size {format_iec(snap.total)}, used {format_iec(snap.used)}"
        f" ({pct:.0f}%), free {format_iec(snap.free)}, peak {format_iec(snap.peak)}",
        "owners: "
        + ", ".join(f"{k} {format_iec(v)}" for k, v in owners(snap).items())
        + f" ({plural(snap.processes, 'process', 'processes')})",
    ]
    cg = snap.cgroup
    if cg.reason is None or cg.limit is not None:
        limit = "no limit" if cg.limit is None else format_iec(cg.limit)
        lines.append(
            f"memory cgroup: limit {limit}, usage {_size(cg.current)}, shmem {_size(cg.shmem)}"
        )
    else:
        lines.append(f"memory cgroup: unknown ({cg.reason})")
    if snap.failed_allocations:
        n = len(snap.failed_allocations)
        lines.append(f"failed allocations: {n} zero-block torch_* file(s)")
    alert = alert_line(snap)
    lines += [alert] if alert else []
    if snap.stall.full and not snap.stalled:
        # One refresh cannot show "no progress"; the rest of the evidence is there.
        lines.append("full with failed allocations (a stall once nothing progresses):")
        lines += [f"  {e}" for e in snap.stall.evidence]
        lines += fix_lines(snap)
    # paths (--container-root), reasons and evidence: control characters escaped
    return [printable(line) for line in lines] + stall_lines(snap)


def alert_line(snap: WatchSnapshot) -> str | None:
    """The threshold alert in one line, or None below the threshold."""
    if not snap.alert:
        return None
    return (
        f"ALERT: /dev/shm reached {format_iec(snap.window_peak)}, at least "
        f"{100 * snap.threshold:.0f}% of {format_iec(snap.total)}"
    )


def watch_view(snap: WatchSnapshot) -> RenderableType:
    """The live view: a table of the figures, the sparkline, the alert and stall lines."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    title = printable(f"shmguard watch: {snap.target} ({snap.path})")
    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")  # a long path folds, never cut with "…"
    pct = 100 * snap.used_fraction
    table.add_row("size", format_iec(snap.total))
    table.add_row("used", f"{format_iec(snap.used)} ({pct:.0f}%)")
    table.add_row("free", format_iec(snap.free))
    table.add_row("peak", format_iec(snap.peak))
    for kind, n in owners(snap).items():
        table.add_row(f"owner {kind}", format_iec(n))
    cg = snap.cgroup
    limit = "no limit" if cg.limit is None and cg.reason is None else _size(cg.limit)
    table.add_row(
        "cgroup limit", limit if cg.reason is None else f"unknown ({printable(cg.reason)})"
    )
    table.add_row("cgroup usage", _size(cg.current))
    table.add_row("cgroup shmem", _size(cg.shmem))
    table.add_row("failed allocs", str(len(snap.failed_allocations)))
    table.add_row("history", sparkline(snap.history, snap.total))
    parts: list[RenderableType] = [table]
    alert = alert_line(snap)
    if alert:
        parts.append(Text(alert, style="bold yellow"))
    for i, line in enumerate(stall_lines(snap)):
        parts.append(Text(line, style="bold red" if i == 0 else ""))
    return Group(*parts)

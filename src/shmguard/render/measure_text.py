"""Human-readable reports for ``sandbox``, ``measure``, ``probe`` and ``demo`` (Rich).

Pure functions from results to Rich renderables and plain strings; the CLI prints them. Rich is
imported inside the functions so the JSON paths never load it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from shmguard.model.finding import Snippet
from shmguard.units import format_iec

if TYPE_CHECKING:
    from shmguard.measure.probe import ProbeResult, Trial
    from shmguard.measure.recommend import Recommendation
    from shmguard.measure.run import MeasureResult
    from shmguard.measure.sampler import Timeline

#: Runtimes shown in text reports (JSON has them all).
TEXT_RUNTIMES = ("docker", "compose", "kubernetes")


def command_line(command: Iterable[str]) -> str:
    """The argv as a shell would need it typed."""
    return shlex.join(list(command))


def owners_line(by_kind: Mapping[str, int]) -> str:
    """``torch 91.9 MiB, semaphore 80 KiB`` (kinds with bytes only), or ``none held``."""
    parts = [f"{k} {format_iec(v)}" for k, v in by_kind.items() if v]
    return ", ".join(parts) if parts else "none held"


def thin_samples(timeline: Timeline, limit: int = 2000) -> list[tuple[float, int]]:
    """At most ``limit`` change points for JSON and plots, always keeping the peak."""
    pts = list(timeline.samples)
    if len(pts) <= limit:
        return pts
    step = len(pts) / limit
    keep = {int(i * step) for i in range(limit)}
    keep.add(len(pts) - 1)
    keep.update(i for i, p in enumerate(pts) if p[1] == timeline.peak)
    return [pts[i] for i in sorted(keep)][: limit + 8]


def _kv(rows: list[tuple[str, str]]) -> Any:
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in rows:
        table.add_row(key, value)
    return table


def snippets_block(snippets: Iterable[Snippet], runtimes: Iterable[str] = TEXT_RUNTIMES) -> Any:
    """The snippets for ``runtimes`` under their titles, as a Rich group."""
    from rich.console import Group
    from rich.syntax import Syntax
    from rich.text import Text

    parts: list[Any] = []
    wanted = list(runtimes)
    for snip in sorted(
        (s for s in snippets if s.runtime in wanted), key=lambda s: wanted.index(s.runtime)
    ):
        parts.append(Text(f"{snip.title}:", style="bold"))
        parts.append(
            Syntax(snip.text, snip.language, theme="ansi_dark", background_color="default")
        )
    return Group(*parts)


def recommendation_block(rec: Recommendation) -> Any:
    """Recommended sizes with their basis, then the snippets."""
    from rich.console import Group
    from rich.text import Text

    if rec.shm_size is None:
        return Group(Text("Recommendation", style="bold underline"), Text(f"none: {rec.shm_basis}"))
    mem = (
        f"{format_iec(rec.memory_limit.value)}  ({rec.memory_basis})"
        if rec.memory_limit.value is not None
        else f"not measured ({rec.memory_limit.reason})"
    )
    return Group(
        Text("Recommendation", style="bold underline"),
        _kv(
            [("shm size", f"{format_iec(rec.shm_size)}  ({rec.shm_basis})"), ("memory limit", mem)]
        ),
        Text(""),
        snippets_block(rec.snippets),
    )


def measure_report(result: MeasureResult) -> Any:
    """The ``measure`` report as a Rich renderable."""
    from rich.console import Group
    from rich.text import Text

    tl = result.timeline
    status = f"{result.cause.outcome.value} (exit status {result.exit_status}"
    status += f", {result.signal})" if result.signal else ")"
    rows = [
        ("command", command_line(result.command)),
        ("result", f"{status} after {result.wall_time:.1f} s: {result.cause.summary}"),
    ]
    if result.cause.signature is not None:
        # The id `shmguard explain` gives the same output (docs/signatures.md lists them).
        rows.append(("signature", result.cause.signature))
    rows += [("evidence", line) for line in result.cause.evidence]
    rows.append(
        (
            "/dev/shm peak",
            f"{format_iec(result.peak)} at {result.peak_at:.2f} s "
            f"(tmpfs {format_iec(result.shm_size)}, {format_iec(result.baseline)} at start)",
        )
    )
    snap = result.owners_at_peak
    if snap is not None:
        rows.append(
            (
                "owners",
                f"{owners_line(snap.by_kind)} (at {snap.t:.2f} s, "
                f"{format_iec(snap.shm_used)} used, "
                f"{snap.processes} processes)",
            )
        )
    mem = result.memory_peak
    rows.append(
        (
            "memory peak",
            f"{format_iec(mem.value)} (memory cgroup, includes the shm pages)"
            if mem.value is not None
            else f"unknown: {mem.reason}",
        )
    )
    if result.rss_peak.value is not None:
        rows.append(
            (
                "RSS peak",
                f"{format_iec(result.rss_peak.value)} "
                "(process tree sum; counts mapped shm per process)",
            )
        )
    rows.append(
        (
            "sampling",
            f"{tl.n_samples} statvfs polls every {tl.interval * 1000:g} ms (mean "
            f"{tl.mean_interval * 1000:.1f} ms, worst gap {tl.max_gap * 1000:.1f} ms"
            f"{', SCHED_FIFO' if tl.realtime else ''}), {len(tl.owners)} owner scans",
        )
    )
    return Group(
        Text("shmguard measure", style="bold"),
        _kv(rows),
        Text(""),
        recommendation_block(result.recommendation),
    )


def trial_line(index: int, trial: Trial) -> str:
    """``#3 bisect 102 MiB FAIL shm-exhausted 3.7 s``."""
    verdict = "pass" if trial.passed else "FAIL"
    detail = "" if trial.passed else f" {trial.outcome.value}"
    size = format_iec(trial.size)
    return f"#{index} {trial.phase:<7} {size:>10}  {verdict}{detail}  {trial.wall_time:.1f} s"


def probe_report(result: ProbeResult) -> Any:
    """The ``probe`` report: every trial, pass rate per size, minimum, recommendation."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    m = result.measure
    head = _kv(
        [
            ("command", command_line(result.command)),
            (
                "measuring run",
                f"{m.cause.outcome.value} with a {format_iec(m.shm_size)} tmpfs "
                f"in {m.wall_time:.1f} s, "
                f"peak {format_iec(m.peak)}",
            ),
        ]
    )
    table = Table(title="Trials", title_justify="left", show_edge=False)
    for col in ("#", "phase", "size", "result", "time", "shm peak"):
        table.add_column(
            col, justify="right" if col in ("#", "size", "time", "shm peak") else "left"
        )
    for i, t in enumerate(result.trials, 1):
        res = "pass" if t.passed else f"FAIL: {t.outcome.value}"
        table.add_row(
            str(i), t.phase, format_iec(t.size), res, f"{t.wall_time:.1f} s", format_iec(t.peak)
        )
    rates = Table(title="Pass rate per size", title_justify="left", show_edge=False)
    rates.add_column("size", justify="right")
    rates.add_column("passed", justify="right")
    for s in result.pass_rates:
        rates.add_row(format_iec(s.size), f"{s.passes}/{s.runs}")
    if result.minimum is not None:
        verdict = Text(
            f"Minimum: {format_iec(result.minimum)} ({result.minimum_basis})", style="bold"
        )
    else:
        verdict = Text(f"No minimum: {result.minimum_basis}", style="bold red")
    extra = []
    if result.verified is not None:
        extra.append(
            Text(
                f"Recommended size verified: {'passed' if result.verified else 'FAILED'}",
                style="green" if result.verified else "bold red",
            )
        )
    cost = Text(
        f"{result.runs} runs (1 measuring + {len(result.trials)} trials) "
        f"in {result.wall_time:.1f} s"
    )
    return Group(
        Text("shmguard probe", style="bold"),
        head,
        Text(""),
        table,
        Text(""),
        rates,
        Text(""),
        verdict,
        *extra,
        cost,
        Text(""),
        recommendation_block(result.recommendation),
    )


def demo_explanation(failure: MeasureResult, batch_bytes: int, workers: int, prefetch: int) -> str:
    """Plain words on why the demo's loader fails in 64 MiB (docs/background.md, "How much is
    needed": steady (nw x pf + 1) batches, peak (nw x pf + 2))."""
    in_flight = workers * prefetch
    need = (in_flight + 1) * batch_bytes
    peak = (in_flight + 2) * batch_bytes
    fits = failure.shm_size // batch_bytes
    how = {
        "shm-exhausted": "a worker's next batch allocation failed and the DataLoader raised "
        "`unable to allocate shared memory(shm)`",
        "hang": "the allocation failed inside a worker's feeder thread, the batch was silently "
        "dropped and the training loop waited for it forever (shmguard detected the hang)",
        "sigbus": "a worker touched shared memory the full /dev/shm could not back and died "
        "of SIGBUS",
    }.get(failure.cause.outcome.value, failure.cause.summary)
    return (
        f"Each batch is 32 images x 3x224x224 float32 = {format_iec(batch_bytes)}. "
        "Every DataLoader "
        f"worker builds its batches directly in /dev/shm, and {workers} workers x prefetch_factor "
        f"{prefetch} keep {in_flight} batches in flight, plus the one your loop holds: "
        f"{format_iec(need)}, and for a moment inside next() the previous batch too: "
        f"{format_iec(peak)}. A {format_iec(failure.shm_size)} /dev/shm holds only "
        f"{fits} batches, so "
        f"{how}. The job never ran out of RAM; the container's /dev/shm is simply too small "
        "(Docker, containerd and CRI-O give 64 MiB unless told otherwise)."
    )

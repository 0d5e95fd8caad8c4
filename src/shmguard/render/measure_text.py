"""Human-readable reports for ``sandbox``, ``measure``, ``probe`` and ``demo`` (Rich).

Pure functions from results to Rich renderables and plain strings; the CLI prints them. Rich is
imported inside the functions so the JSON paths never load it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from shmguard.fix.snippets import Snippet, render_snippets
from shmguard.render.escape import printable
from shmguard.render.parts import Part
from shmguard.render.words import plural
from shmguard.units import format_iec

if TYPE_CHECKING:
    from shmguard.estimate import Recommendation
    from shmguard.measure.probe import ProbeResult, Trial
    from shmguard.measure.run import MeasureResult
    from shmguard.measure.sampler import Timeline

#: Runtimes shown in text reports (JSON has them all).
TEXT_RUNTIMES = ("docker", "compose", "kubernetes")


def command_line(command: Iterable[str]) -> str:
    """The argv as a shell would need it typed (control characters escaped: render/escape.py)."""
    return printable(shlex.join(list(command)))


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


def _kv(rows: list[tuple[str, str]], key_width: int = 0) -> Any:
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True, min_width=key_width)
    table.add_column(overflow="fold")  # a long path folds, never cut with "…"
    for key, value in rows:  # values hold log lines and paths: escaped (render/escape.py)
        table.add_row(key, printable(value))
    return table


def _head(title: str, command: Iterable[str], rows: list[tuple[str, str]]) -> list[Part]:
    """The title, the command as one verbatim line (pasteable at any width), then the other
    rows as a key/value grid aligned with it (their prose wraps)."""
    from rich.text import Text

    width = max(len(k) for k, _ in [("command", ""), *rows])
    line = Text()
    line.append(f"{'command':<{width}}", style="bold")
    line.append(f"  {command_line(command)}")
    return [(Text(title, style="bold"), False), (line, True), (_kv(rows, width), False)]


def snippets_parts(
    snippets: Iterable[Snippet], runtimes: Iterable[str] = TEXT_RUNTIMES
) -> list[Part]:
    """The snippets for ``runtimes`` under their titles; the snippets verbatim."""
    from rich.syntax import Syntax
    from rich.text import Text

    parts: list[Part] = []
    wanted = list(runtimes)
    for snip in sorted(
        (s for s in snippets if s.runtime in wanted), key=lambda s: wanted.index(s.runtime)
    ):
        parts.append((Text(f"{snip.title}:", style="bold"), False))
        parts.append(
            (Syntax(snip.text, snip.language, theme="ansi_dark", background_color="default"), True)
        )
    return parts


def recommendation_parts(rec: Recommendation) -> list[Part]:
    """Recommended sizes with their basis, then the snippets."""
    from rich.text import Text

    title: Part = (Text("Recommendation", style="bold underline"), False)
    if rec.shm_size is None:
        return [title, (Text(f"none: {rec.shm_basis}"), False)]
    mem = (
        f"{format_iec(rec.memory_limit.value)}  ({rec.memory_basis})"
        if rec.memory_limit.value is not None
        else f"not measured ({rec.memory_limit.reason})"
    )
    rows = [("shm size", f"{format_iec(rec.shm_size)}  ({rec.shm_basis})"), ("memory limit", mem)]
    return [
        title,
        (_kv(rows), False),
        (Text(""), False),
        *snippets_parts(render_snippets(rec.changes)),
    ]


def measure_report(result: MeasureResult) -> list[Part]:
    """The ``measure`` report as parts (print with :func:`~shmguard.render.parts.print_parts`:
    the command and the snippets are never wrapped)."""
    from rich.text import Text

    tl = result.timeline
    status = f"{result.cause.outcome.value} (exit status {result.exit_status}"
    status += f", {result.signal})" if result.signal else ")"
    rows = [("result", f"{status} after {result.wall_time:.1f} s: {result.cause.summary}")]
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
                f"{plural(snap.processes, 'process', 'processes')})",
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
    return [
        *_head("shmguard measure", result.command, rows),
        (Text(""), False),
        *recommendation_parts(result.recommendation),
    ]


def trial_line(index: int, trial: Trial) -> str:
    """``#3 bisect 102 MiB FAIL shm-exhausted 3.7 s``."""
    verdict = "pass" if trial.passed else "FAIL"
    detail = (
        f" {trial.outcome.value}" if not trial.passed else " (survived)" if trial.survived else ""
    )
    size = format_iec(trial.size)
    return f"#{index} {trial.phase:<7} {size:>10}  {verdict}{detail}  {trial.wall_time:.1f} s"


def probe_report(result: ProbeResult) -> list[Part]:
    """The ``probe`` report: every trial, pass rate per size, minimum, recommendation. When the
    measuring run failed: why, the tail of its stderr, and no empty tables. Parts as in
    :func:`measure_report`."""
    from rich.table import Table
    from rich.text import Text

    m = result.measure
    ran = (
        f"{m.cause.outcome.value} with a {format_iec(m.shm_size)} tmpfs in {m.wall_time:.1f} s, "
        f"peak {format_iec(m.peak)}"
    )
    if m.survived:
        ran += " (still going at the trial time: stopped)"
    rows: list[tuple[str, str]] = []
    if m.passed:
        rows.append(("measuring run", ran))
        rows.append(("search", result.start_basis))
    else:
        rows.append(("measuring run", f"{ran}: {m.cause.summary}"))
        rows += [("evidence", line) for line in m.cause.evidence]
    parts = _head("shmguard probe", result.command, rows)
    if not m.passed:
        parts += [(Text(""), False), *stderr_parts(m.stderr_tail, "the measuring run")]
    if result.trials:
        table = Table(title="Trials", title_justify="left", show_edge=False)
        for col in ("#", "phase", "size", "result", "time", "shm peak"):
            table.add_column(
                col, justify="right" if col in ("#", "size", "time", "shm peak") else "left"
            )
        for i, t in enumerate(result.trials, 1):
            res = "pass" if t.passed else f"FAIL: {t.outcome.value}"
            if t.survived:
                res += " (survived)"
            table.add_row(
                str(i),
                t.phase,
                format_iec(t.size),
                res,
                f"{t.wall_time:.1f} s",
                format_iec(t.peak),
            )
        title = "Pass rate per size"  # min_width: the title on one line above a narrow table
        rates = Table(title=title, title_justify="left", show_edge=False, min_width=len(title))
        rates.add_column("size", justify="right")
        rates.add_column("passed", justify="right")
        for s in result.pass_rates:
            rates.add_row(format_iec(s.size), f"{s.passes}/{s.runs}")
        parts += [(Text(""), False), (table, False), (Text(""), False), (rates, False)]
    if result.minimum is not None:
        verdict = Text(
            f"Minimum: {format_iec(result.minimum)} ({result.minimum_basis})", style="bold"
        )
    else:
        verdict = Text(f"No minimum: {printable(result.minimum_basis)}", style="bold red")
    parts += [(Text(""), False), (verdict, False)]
    if result.verified is not None:
        verified = Text(
            f"Recommended size verified: {'passed' if result.verified else 'FAILED'}",
            style="green" if result.verified else "bold red",
        )
        parts.append((verified, False))
    if result.trial_time is not None:
        from shmguard.measure.survive import STOP_GRACE

        passes = sum(t.passed for t in result.trials) + int(m.passed)
        parts.append(
            (
                Text(
                    f"Trial time {result.trial_time:g} s: {result.survived} of {passes} passing "
                    "runs were still going then with /dev/shm steady and were stopped (SIGTERM, "
                    f"then SIGKILL after {STOP_GRACE:g} s); they count as passes (survived)"
                ),
                False,
            )
        )
    cost = Text(
        f"{result.runs} runs (1 measuring + {len(result.trials)} trials) "
        f"in {result.wall_time:.1f} s"
    )
    parts.append((cost, False))
    rec = result.recommendation
    if not (rec.shm_size is None and rec.shm_basis == result.minimum_basis):
        # (no size for the reason just given: the block would only repeat it)
        parts += [(Text(""), False), *recommendation_parts(rec)]
    return parts


def stderr_parts(lines: tuple[str, ...], whose: str) -> list[Part]:
    """The last lines of a captured stderr (verbatim) under a heading, or a line saying there
    were none."""
    from rich.text import Text

    if not lines:
        return [(Text(f"{whose.capitalize()} wrote nothing on stderr.", style="dim"), False)]
    noun = "line" if len(lines) == 1 else "lines"
    head = Text(f"stderr of {whose} (last {len(lines)} {noun}):", style="bold")
    return [(head, False), *((Text(f"  {printable(line)}"), True) for line in lines)]


def demo_result(failure: MeasureResult) -> str:
    """demo's step 1 verdict: how the run in Docker's default 64 MiB ended."""
    verdict = "failed" if not failure.passed else "passed (unexpected)"
    return (
        f"Result: {verdict}: {failure.cause.outcome.value}, exit status {failure.exit_status}, "
        f"after {failure.wall_time:.1f} s; /dev/shm peak {format_iec(failure.peak)} of 64 MiB."
    )


def demo_fix(rec: Recommendation) -> str | None:
    """demo's step 4: the size to give, and the two other ways out; None without a size."""
    if rec.shm_size is None:
        return None
    return (
        f"Give the container {format_iec(rec.shm_size)} of /dev/shm (the snippets above), or "
        "keep 64 MiB and ship uint8 images from the workers (examples/fits_loader.py needs "
        "about 42 MiB), or lower num_workers x prefetch_factor."
    )


def demo_explanation(failure: MeasureResult, batch_bytes: int, workers: int, prefetch: int) -> str:
    """Plain words on why the demo's loader fails in 64 MiB (docs/background.md, "How much is
    needed": a slow consumer sits on (nw x pf + 1) batches; (nw x pf + 2) bounds every run, and
    a run can pass below that bound)."""
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
        f"{prefetch} keep up to {in_flight} batches in flight, plus the one your loop holds: "
        f"{format_iec(need)} when the loop is slower than the workers and the queue stays full. "
        "If the previous batch is still alive inside next() while a worker builds a new one, "
        f"that is one batch more: {format_iec(peak)}, the most that can be in flight. That "
        "is an upper bound, not what every run reaches: a run can pass below it (step 3 finds "
        f"the smallest size that passed). A {format_iec(failure.shm_size)} /dev/shm "
        f"holds only {fits} batches, so "
        f"{how}. The job never ran out of RAM; the container's /dev/shm is simply too small "
        "(Docker, containerd and CRI-O give 64 MiB unless told otherwise)."
    )

"""``shmguard tune``'s text report (its JSON body: :func:`shmguard.render.json_bodies.tune_body`).

The table lists every trial; the recommendation is given as DataLoader keyword arguments and
as the container settings it needs, the shm size and memory limit written by the one snippet
renderer, the CPUs as each runtime's flag (docker ``--cpus``, Compose ``cpus``, Kubernetes
``resources.limits.cpu``).
"""

from __future__ import annotations

from typing import Any

from shmguard.fix.snippets import fix_snippets
from shmguard.render.escape import printable
from shmguard.render.measure_text import TEXT_RUNTIMES, _kv, snippets_parts
from shmguard.render.parts import Part
from shmguard.torch.tuning.model import Trial, TuneResult
from shmguard.units import format_iec


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f} MiB"


def kwargs_text(trial: Trial) -> str:
    """The DataLoader keyword arguments of ``trial``: ``num_workers=2, prefetch_factor=1``."""
    c = trial.config
    text = f"num_workers={c.num_workers}"
    if c.num_workers:
        text += f", prefetch_factor={c.prefetch_factor}"
        text += f", persistent_workers={c.persistent_workers}"
    return text + f", pin_memory={c.pin_memory}"


def cpus_text(cpus: float) -> str:
    """The CPU setting in each runtime's syntax."""
    n = f"{cpus:g}"
    return f"{n} (docker/podman --cpus={n}; Compose cpus: {n}; Kubernetes limits.cpu: {n})"


def trial_table(result: TuneResult) -> Any:
    """Every trial as a Rich table; the recommended row is marked ``*``. A re-measured
    trial's samples/s is the median of its confirmation runs: ``runs`` says how many (and in
    brackets their spread, ``(max - min) / median``)."""
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("")
    table.add_column("config", no_wrap=True)
    # runs and spread only where a confirmation round ran: a narrow terminal keeps room for
    # the outcome's reason (a one-character column once folded it letter by letter)
    confirmed = any(t.repeats for t in result.trials)
    columns = ("samples/s", "runs") if confirmed else ("samples/s",)
    for name in (*columns, "wait", "peak shm", "model", "memory", "CPU s"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("outcome")
    notes = {id(t): i for i, t in enumerate(_explained(result), 1)}
    for t in result.trials:
        mark = "*" if t is result.recommended else ""
        rate = "-" if t.samples_per_s is None else f"{t.samples_per_s:,.0f}"
        runs = "-" if t.samples_per_s is None else "1"
        if t.repeats:
            runs = f"{len(t.repeats)} ({t.spread or 0:.0%})"
        wait = "-" if t.data_wait is None else f"{t.data_wait:.0%}"
        cpu = "-" if t.cpu_seconds is None else f"{t.cpu_seconds:.1f}"
        outcome = f"{t.status} [{notes[id(t)]}]" if id(t) in notes else t.status
        table.add_row(
            mark,
            t.config.label(),
            *((rate, runs) if confirmed else (rate,)),
            wait,
            _mib(t.peak_shm) if t.status != "ruled-out" else "-",
            _mib(t.predicted_peak),
            _mib(t.memory_peak),
            cpu,
            outcome,
        )
    return table


def _explained(result: TuneResult) -> list[Trial]:
    return [t for t in result.trials if not t.ok and t.reason]


def reasons(result: TuneResult) -> list[str]:
    """``[n] config status: reason`` for every trial that did not run ok, printed under the
    table (a reason in a table column was folded letter by letter on an 80-column terminal)."""
    return [
        printable(f"[{i}] {t.config.label()} {t.status}: {t.reason}")
        for i, t in enumerate(_explained(result), 1)
    ]


def tune_report(result: TuneResult) -> list[Part]:
    """The report as parts: budget, trials, recommendation, settings, snippets, notes."""
    from rich.text import Text

    b = result.budget
    mem = format_iec(b.memory) if b.memory is not None else "none"
    ranks = (
        f", {b.local_ranks} local ranks: each trial gets 1/{b.local_ranks}"
        if (b.local_ranks > 1)
        else ""
    )
    rows = [
        ("loader", result.loader),
        (
            "budget",
            f"/dev/shm {format_iec(b.shm)}, memory {mem}, "
            f"{b.cpus:g} {'CPU' if b.cpus == 1 else 'CPUs'}{ranks} "
            f"({'; '.join(b.sources)})",
        ),
        (
            "trials",
            f"{sum(1 for t in result.trials if t.status != 'ruled-out')} run, "
            f"{sum(1 for t in result.trials if t.status == 'ruled-out')} ruled out by the model;"
            f" {result.steps} timed batches each, {result.step_time:g} s simulated step; "
            f"{result.wall_time:.0f} s in all",
        ),
    ]
    parts: list[Part] = [
        (Text("Tune", style="bold underline"), False),
        (_kv(rows), False),
        (Text(""), False),
        (trial_table(result), False),
        *((Text(line), False) for line in reasons(result)),
        (Text(""), False),
    ]
    if result.interrupted:
        parts.append(
            (Text("Interrupted: the recommendation is the best of the trials above."), False)
        )
    rec, s = result.recommended, result.settings
    if rec is None or s is None:
        parts.append((Text("No configuration ran within the budget.", style="bold"), False))
    else:
        best = result.best
        speed = f"{rec.samples_per_s:,.0f} samples/s" if rec.samples_per_s else ""
        if best is not None and best is not rec and best.samples_per_s:
            speed += (
                f", {(rec.samples_per_s or 0) / best.samples_per_s:.0%} of the fastest "
                f"({best.config.label()})"
            )
        rec_rows = [
            ("DataLoader", kwargs_text(rec)),
            ("throughput", speed),
            ("shm size", f"{format_iec(s.shm_size)}  ({s.shm_basis})"),
            (
                "memory limit",
                f"{format_iec(s.memory_limit) if s.memory_limit else 'none'}  ({s.memory_basis})",
            ),
            ("CPUs", cpus_text(s.cpus)),
        ]
        parts += [(Text("Recommendation", style="bold underline"), False), (_kv(rec_rows), False)]
        parts.append((Text(f"DataLoader(..., {kwargs_text(rec)})"), True))
        parts += snippets_parts(fix_snippets(s), TEXT_RUNTIMES)
    if result.notes:
        parts.append((Text("Notes", style="bold"), False))
        parts.append((_kv([("-", n) for n in result.notes]), False))
    return parts

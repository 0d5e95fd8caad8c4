"""``shmguard tune``: the fastest DataLoader configuration that fits the budget.

Thin: parse arguments, call :func:`shmguard.torch.tuning.tune` with a progress callback that
draws a Rich progress bar on stderr, render the report or JSON, exit.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, fail, size_option
from shmguard.cli._config import settings
from shmguard.cli._runopts import EXIT_INTERRUPTED, _check_plot, _positive, _print, save_plot

_Plot = Annotated[
    Optional[Path],  # noqa: UP045 - Typer evaluates this at runtime on Python 3.10
    typer.Option(
        "--plot",
        metavar="FILE.png",
        help="Write throughput and peak /dev/shm against num_workers, with the shm budget, to "
        "FILE.png (needs matplotlib: the plot extra).",
    ),
]


class _Bar:
    """Draws the search's progress on stderr: one line per finished trial, above a live bar
    on a terminal (``progress`` None: the lines alone)."""

    def __init__(self, console: Any, progress: Any = None) -> None:
        self.console = console
        self.progress = progress
        self.task = progress.add_task("starting", total=None) if progress is not None else None

    def __call__(self, event: Any) -> None:
        if event.phase == "confirm":
            self._confirm(event)
            return
        if event.trial is None:
            if self.progress is not None:
                self.progress.update(self.task, description=f"trial: {event.config.label()}")
            return
        if self.progress is not None:
            self.progress.update(self.task, completed=event.done)
        t = event.trial
        rate = f"{t.samples_per_s:,.0f} samples/s" if t.samples_per_s is not None else t.reason
        self.console.print(f"  {event.config.label()}: {t.status}, {rate}", highlight=False)

    def _confirm(self, event: Any) -> None:
        t = event.trial
        if t is None:
            names = ", ".join(c.label() for c in event.finalists)
            if self.progress is not None:
                self.progress.update(self.task, description=f"confirming: {names}")
            self.console.print(f"  confirming in alternation: {names}", highlight=False)
            return
        runs = " ".join(f"{r:,.0f}" for r in t.repeats)
        self.console.print(
            f"  {t.config.label()}: median {t.samples_per_s:,.0f} samples/s "
            f"(runs {runs}; spread {t.spread:.0%})",
            highlight=False,
        )


def _run(ref: str, quiet: bool, **kwargs: Any) -> Any:
    from shmguard.torch.tuning import tune as run_tune

    if quiet:
        return run_tune(ref, **kwargs)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from shmguard.cli._common import console

    err = console(stderr=True)
    if not err.is_terminal:  # no live bar in a log: it would only add blank lines
        return run_tune(ref, progress=_Bar(err), **kwargs)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed} done"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        return run_tune(ref, progress=_Bar(progress.console, progress), **kwargs)


def _search(
    loader: str,
    budget_shm: str | None,
    budget_memory: str | None,
    cpus: float | None,
    local_ranks: int,
    step_time: float,
    steps: int,
    warmup: int,
    confirm_rounds: int,
    trial_timeout: float,
    hang_after: float,
    plot: Path | None,
    json_out: bool,
    quiet: bool,
) -> Any:
    """Check the options, then tune (Ctrl-C from the start on reaches the caller)."""
    from shmguard.measure.sandbox import SandboxError
    from shmguard.torch.tuning import BudgetError, TuneInputError, loader_ref

    shm = size_option(budget_shm, "--budget-shm")
    mem = size_option(budget_memory, "--budget-memory")
    _positive(cpus, "--cpus")
    _positive(trial_timeout, "--trial-timeout")
    _positive(hang_after, "--hang-after")
    for value, flag, least in ((local_ranks, "--local-ranks", 1), (steps, "--steps", 1),
                               (warmup, "--warmup", 0),
                               (confirm_rounds, "--confirm-rounds", 0)):  # fmt: skip
        if value < least:
            fail(f"{flag}: must be >= {least}, got {value}")
    if not math.isfinite(step_time) or step_time < 0:
        fail(f"--step-time: must be a finite number >= 0, got {step_time:g}")
    if plot is not None:
        _check_plot(plot)
    try:
        ref = loader_ref(loader)
    except TuneInputError as err:
        fail(str(err))
    if not _importable_torch():
        fail("tune needs PyTorch: pip install 'shmguard[torch]'")
    try:
        return _run(
            ref,
            quiet or json_out,
            budget_shm=shm,
            budget_memory=mem,
            cpus=cpus,
            local_ranks=local_ranks,
            step_time=step_time,
            steps=steps,
            warmup=warmup,
            confirm_rounds=confirm_rounds,
            trial_timeout=trial_timeout,
            hang_after=hang_after,
            policy=settings(None).policy,
        )
    except (TuneInputError, BudgetError) as err:
        fail(str(err))
    except SandboxError as err:
        fail(f"cannot run trials: {err}")


@app.command()
def tune(
    loader: str = typer.Option(
        ...,
        "--loader",
        metavar="MODULE:FACTORY",
        help="FACTORY(num_workers=, prefetch_factor=, persistent_workers=, pin_memory=) "
        "returns your DataLoader (MODULE is imported from the working directory and sys.path).",
    ),
    budget_shm: str | None = typer.Option(
        None,
        "--budget-shm",
        metavar="SIZE",
        help="/dev/shm of the production container [default: 80% of this container's; "
        "required when this /dev/shm is the host's].",
        show_default=False,
    ),
    budget_memory: str | None = typer.Option(
        None,
        "--budget-memory",
        metavar="SIZE",
        help="Memory limit of the production container [default: this container's, if any].",
        show_default=False,
    ),
    cpus: float | None = typer.Option(
        None,
        "--cpus",
        help="CPUs of the production container [default: this container's quota and cpuset].",
        show_default=False,
    ),
    local_ranks: int = typer.Option(
        1, "--local-ranks", help="Ranks per node sharing the budgets (each gets 1/N)."
    ),
    step_time: float = typer.Option(
        0.0, "--step-time", metavar="SECONDS", help="Simulated training time per batch."
    ),
    steps: int = typer.Option(30, "--steps", help="Timed batches per trial."),
    warmup: int = typer.Option(3, "--warmup", help="Batches before timing starts."),
    confirm_rounds: int = typer.Option(
        3,
        "--confirm-rounds",
        metavar="N",
        help="Runs of each finalist, in alternation, before the pick (0: pick from single trials).",
    ),
    trial_timeout: float = typer.Option(
        60.0, "--trial-timeout", metavar="SECONDS", help="A trial running longer is infeasible."
    ),
    hang_after: float = typer.Option(
        5.0, "--hang-after", help="Seconds of full /dev/shm and no progress that count as a hang."
    ),
    plot: _Plot = None,
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Find the fastest DataLoader configuration that fits the container's CPU, memory and
    /dev/shm budget, by running each in a sandbox of that budget.

    num_workers is swept (0, 1, 2, 4, ... up to the CPUs; configurations the DataLoader model
    says overflow the shm budget are ruled out without running), then refined, then
    prefetch_factor, persistent_workers and (with a GPU) pin_memory. The finalists (the 3
    fastest within 50% of the fastest, and the cheapest of those) are then re-measured in
    alternation, and the pick is the cheapest configuration whose median is within 2% of the
    best or that cannot be told apart from it. Ctrl-C keeps what was found.

    Exit status: 0 with a recommendation, 1 when no configuration ran within the budget, 2 for
    bad input (a factory that raises, returns no DataLoader, fixes num_workers or ignores
    another keyword; a dataset that raises without workers),
    130 when interrupted (the partial report is printed).
    """
    try:
        result = _search(
            loader, budget_shm, budget_memory, cpus, local_ranks, step_time, steps, warmup,
            confirm_rounds, trial_timeout, hang_after, plot, json_out, quiet,
        )  # fmt: skip
    except KeyboardInterrupt:
        # Before the first trial (reading the budget, starting up): nothing found to report.
        # Once trials run, tune keeps what was found and the report below says so.
        fail("interrupted before the first trial ended; nothing to report", EXIT_INTERRUPTED)
    if plot is not None:
        _write_plot(result, plot)
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import tune_body

        sys.stdout.write(dumps("tune", tune_body(result)) + "\n")
    else:
        from shmguard.render.tune_text import tune_report

        _print(tune_report(result))
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if result.recommended is not None else EXIT_FINDINGS)


def _importable_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _write_plot(result: Any, path: Path) -> None:
    from shmguard.render.tune_plot import plot_tune

    save_plot(lambda: plot_tune(result, path), path, "the tune plot")

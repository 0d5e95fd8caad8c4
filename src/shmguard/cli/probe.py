"""``shmguard probe | demo``: find the smallest /dev/shm a command reliably succeeds with.

Thin: parse arguments, call :mod:`shmguard.measure`, render, exit. Heavy imports (Rich, psutil)
happen inside the command bodies.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, console, fail, size_option
from shmguard.cli._config import settings
from shmguard.cli._runopts import (
    _CTX,
    _MAX_CONFIRM,
    EXIT_INTERRUPTED,
    _check_command,
    _Command,
    _Cpus,
    _duration,
    _limits,
    _Memory,
    _percent,
    _positive,
    _print,
    _sandbox_errors,
    _within_memory,
)


class _ProgressObserver:
    """Draws probe's progress with a Rich progress bar on stderr."""

    def __init__(self, progress: Any, estimate: int) -> None:
        self.progress = progress
        self.task = progress.add_task("measuring", total=estimate)
        self.n = 0

    def measuring(self, size: int) -> None:
        from shmguard.units import format_iec

        self.progress.update(self.task, description=f"measuring run ({format_iec(size)} tmpfs)")

    def trial_started(self, size: int, phase: str, lo: int, hi: int) -> None:
        from shmguard.units import format_iec

        self.n += 1
        self.progress.update(self.task, description=f"trial {self.n}: {phase} {format_iec(size)}")

    def trial_done(self, trial: Any) -> None:
        from shmguard.render.measure_text import trial_line

        task = self.progress.tasks[0]
        if task.total is not None and task.completed + 1 >= task.total:
            self.progress.update(self.task, total=task.completed + 2)
        self.progress.advance(self.task)
        self.progress.console.print(trial_line(self.n, trial), highlight=False)


def _run_probe(argv: list[str], **kwargs: Any) -> Any:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from shmguard.measure.probe import probe_command

    err_console = console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        # the typical search from the model: measuring run, 2 to bracket, confirmations, verify
        observer = _ProgressObserver(progress, estimate=3 + kwargs.get("confirm", 3))
        result = probe_command(argv, observer=observer, **kwargs)
        progress.advance(observer.task)
    return result


@app.command(context_settings=_CTX)
def probe(
    command: _Command = None,
    floor: str | None = typer.Option(
        None, "--floor", metavar="SIZE", help="A size assumed to fail (default 0)."
    ),
    ceiling: str | None = typer.Option(
        None,
        "--ceiling",
        metavar="SIZE",
        help="tmpfs of the measuring run (default half of RAM, >= 1 GiB).",
    ),
    tolerance: str = typer.Option(
        "5%", "--tolerance", metavar="PCT", help="Resolution of the search."
    ),
    confirm: int = typer.Option(3, "--confirm", help="Passes in a row required at the minimum."),
    max_runs: int = typer.Option(
        16,  # shmguard.measure.probe.MAX_RUNS (not imported here: the CLI imports lazily)
        "--max-runs",
        help="Run budget: sandboxed runs in all, the measuring run and the verification included.",
    ),
    trial_timeout: float | None = typer.Option(
        None, "--trial-timeout", help="Seconds per trial (default 3x the measuring run, >= 30)."
    ),
    trial_time: str | None = typer.Option(
        None,
        "--trial-time",
        metavar="DURATION",
        help="For a job that never ends: a run still going after DURATION (30s, 2m) with "
        "/dev/shm steady is stopped (SIGTERM, then SIGKILL) and passes.",
    ),
    memory: _Memory = None,
    cpus: _Cpus = None,
    hang_after: float = typer.Option(
        5.0, "--hang-after", help="Seconds of full /dev/shm and no progress that count as a hang."
    ),
    headroom: str | None = typer.Option(
        None,
        "--headroom",
        metavar="PCT",
        help="Added for the recommendation "
        "[default: the configuration's sizes.headroom, else 25%].",
        show_default=False,
    ),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Run the recommended size once."
    ),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Find the smallest /dev/shm size at which CMD reliably succeeds.

    For a PyTorch DataLoader the search starts from the model's steady level for the workers
    and batches the first (measuring) run saw; otherwise it bisects below the measured peak.

    Exit status: 0 when a minimum was found, 1 when the command fails even at the ceiling or no
    size passed reliably, 2 for usage errors.
    """
    low = size_option(floor, "--floor", allow_zero=True) or 0
    top = size_option(ceiling, "--ceiling")
    tol = _percent(tolerance, "--tolerance")
    if not 0 < tol < 1:
        fail(f"--tolerance: must be between 0% and 100%, got {tolerance!r}")
    if not 1 <= confirm <= _MAX_CONFIRM:
        fail(f"--confirm: must be from 1 to {_MAX_CONFIRM}, got {confirm}")
    if max_runs < 3:
        fail(
            f"--max-runs: must be at least 3 (measuring run, a trial, verification), got {max_runs}"
        )
    _positive(trial_timeout, "--trial-timeout")
    _positive(hang_after, "--hang-after")
    run_for = _duration(trial_time, "--trial-time")
    mem = size_option(memory, "--memory")
    conf = settings(None)
    room = _percent(headroom, "--headroom") if headroom is not None else None
    if top is not None and low >= top:
        fail("--floor must be below --ceiling")
    argv = _check_command(command)
    _within_memory(top, "--ceiling")
    _limits(None, mem, cpus)
    with _sandbox_errors():
        result = _run_probe(
            argv,
            floor=low,
            ceiling=top,
            tolerance=tol,
            confirm=confirm,
            max_runs=max_runs,
            trial_timeout=trial_timeout,
            hang_after=hang_after,
            headroom=room,
            policy=conf.policy,
            verify=verify,
            memory_limit=mem,
            cpus=cpus,
            trial_time=run_for,
        )
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import probe_body

        sys.stdout.write(dumps("probe", probe_body(result)) + "\n")
    else:
        from shmguard.render.measure_text import probe_report

        _print(probe_report(result))
    raise typer.Exit(EXIT_OK if result.minimum is not None else EXIT_FINDINGS)


def _demo_argv(batches: int) -> list[str]:
    """The bundled seed loader's command line for ``demo --batches N`` (exits 2 without torch)."""
    import importlib.util

    from shmguard.examples import __file__ as examples_init

    if batches < 1:
        fail(f"--batches: must be at least 1, got {batches}")
    if importlib.util.find_spec("torch") is None:
        fail(
            "demo needs PyTorch (any 2.x); for the CPU-only wheel: python3 -m pip install "
            "torch --index-url https://download.pytorch.org/whl/cpu"
        )
    script = Path(examples_init).with_name("seed_loader.py")
    # 0.1 s of fake training per batch: the prefetch queue fills as it does in real training
    # (a loop that does no work is production-limited and needs less; torch_shm.md section 3).
    return [sys.executable, str(script), "--batches", str(batches), "--step-time", "0.1", "--quiet"]


@app.command()
def demo(
    batches: int = typer.Option(20, "--batches", help="Batches per run of the example loader."),
) -> None:
    """Reproduce the classic DataLoader /dev/shm failure, explain it, size it and print the fix.

    Runs the bundled image-classification loader (3x224x224 float32, batch 32, 4 workers) in a
    64 MiB sandbox (Docker's default), then probes the smallest size that works. Needs PyTorch.
    About a minute on 2 cores.
    """
    from rich.rule import Rule
    from rich.text import Text

    from shmguard.cli._output import rule_width
    from shmguard.measure.run import measure_command
    from shmguard.measure.sandbox import RunInterrupted
    from shmguard.render.escape import printable
    from shmguard.render.measure_text import (
        command_line,
        demo_explanation,
        demo_fix,
        demo_result,
        probe_report,
    )
    from shmguard.render.parts import print_parts
    from shmguard.units import DOCKER_DEFAULT_SHM

    argv = _demo_argv(batches)
    con: Any = console()

    def step(title: str) -> None:  # never cut with "..." off a terminal (cli/_output.py)
        con.print(Rule(title), width=rule_width(con, title))

    step("1. A typical image-classification DataLoader in Docker's default 64 MiB /dev/shm")
    cmd = Text(f"$ shmguard sandbox --shm-size 64m -- {command_line(argv)}", style="dim")
    con.print(cmd, soft_wrap=True)  # a command: never wrapped, so it can be pasted
    with _sandbox_errors():
        failure = measure_command(
            argv, shm_size=DOCKER_DEFAULT_SHM, output="capture", timeout=90, hang_after=5.0
        )
    if failure.interrupted:
        fail(str(RunInterrupted(failure.interrupted)), EXIT_INTERRUPTED)
    con.print(demo_result(failure))
    for line in failure.cause.evidence[:2]:  # torch's own words, quoted: never wrapped
        con.print(Text(f"  {printable(line)}", style="red"), soft_wrap=True)
    step("2. Why")
    if failure.passed:
        con.print("This run got lucky (the edge is random for fast consumers); it usually fails.")
    con.print(demo_explanation(failure, 32 * 3 * 224 * 224 * 4, 4, 2))
    step("3. The smallest /dev/shm that works (shmguard probe)")
    with _sandbox_errors():
        result = _run_probe(argv, hang_after=5.0)
    print_parts(con, probe_report(result))
    step("4. The fix")
    fix = demo_fix(result.recommendation)
    if fix is not None:
        con.print(fix)
    raise typer.Exit(EXIT_OK)

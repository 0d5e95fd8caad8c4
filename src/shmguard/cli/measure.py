"""``shmguard sandbox | measure | probe | demo``: run real commands under a private /dev/shm.

Thin: parse arguments, call :mod:`shmguard.measure`, render, exit. Heavy imports (Rich, psutil,
matplotlib) happen inside the command bodies.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, console, fail, size_option

#: Shell convention for "ended by SIGINT".
EXIT_INTERRUPTED = 130
_CTX = {"allow_interspersed_args": False, "ignore_unknown_options": True}
_CMD_HELP = "The command to run, after `--` (e.g. `-- python train.py`)."
_Command = Annotated[
    Optional[list[str]],  # noqa: UP045 - Typer evaluates this at runtime on Python 3.10
    typer.Argument(metavar="-- CMD ...", help=_CMD_HELP),
]
_Plot = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--plot", metavar="FILE.png", help="Write the shm timeline to FILE.png (needs matplotlib)."
    ),
]


def _check_command(command: list[str] | None) -> list[str]:
    if not command:
        fail("no command given; put it after `--`, e.g. `-- python train.py`")
    prog = command[0]
    if "/" in prog:
        if not os.path.exists(prog):
            fail(f"command not found: {prog}")
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            fail(f"command is not executable: {prog}")
    elif shutil.which(prog) is None:
        fail(f"command not found: {prog} (not on PATH)")
    return list(command)


def _positive(value: float | None, flag: str) -> float | None:
    if value is not None and not math.isfinite(value):
        fail(f"{flag}: must be a finite number, got {value:g}")
    if value is not None and value <= 0:
        fail(f"{flag}: must be greater than 0, got {value:g}")
    return value


def _percent(text: str, flag: str) -> float:
    raw = text.strip().rstrip("%")
    try:
        value = float(raw)
    except ValueError:
        fail(f"{flag}: invalid percentage {text!r}; use e.g. 25 or 25%")
    if not math.isfinite(value):
        fail(f"{flag}: must be a finite percentage, got {text!r}")
    if value < 0:
        fail(f"{flag}: must be >= 0, got {text!r}")
    return value / 100


def _limits(shm: int | None, memory: int | None, cpus: float | None) -> None:
    """Refuse limits Docker would refuse; warn when --memory cannot hold a full /dev/shm."""
    from shmguard.measure.cgroups import available_cpus, check_limits
    from shmguard.units import format_iec

    _positive(cpus, "--cpus")
    problem = check_limits(memory, None)
    if problem is not None:
        fail(f"--memory: {problem.removeprefix('memory limit ')}")
    problem = check_limits(None, cpus, available_cpus())
    if problem is not None:
        fail(f"--cpus: {problem.removeprefix('cpus ')}")
    if memory is not None and shm is not None and memory <= shm:
        sys.stderr.write(
            f"shmguard: warning: --memory {format_iec(memory)} is not above --shm-size "
            f"{format_iec(shm)}: tmpfs pages count against the memory limit, so the job is "
            "OOM-killed before /dev/shm can fill\n"
        )


#: Largest --confirm: probe stops after 30 trials, and more than 10 passes in a row at one size
#: would leave too few for the bisection.
_MAX_CONFIRM = 10
#: Bounds of --interval in ms: below 0.1 ms the sampler would spin a core (with SCHED_FIFO).
_INTERVAL_MS = (0.1, 1000.0)


def _print(renderable: Any) -> None:
    con: Any = console()
    con.print(renderable)


@app.command(context_settings=_CTX)
def sandbox(
    command: _Command = None,
    shm_size: str = typer.Option(
        ..., "--shm-size", metavar="SIZE", help="Size of the private /dev/shm (64m, 1g, 512Mi)."
    ),
    memory: str | None = typer.Option(
        None, "--memory", metavar="SIZE", help="Memory limit (a real cgroup limit)."
    ),
    cpus: float | None = typer.Option(None, "--cpus", help="CPU quota in CPUs (CFS bandwidth)."),
    stop_timeout: float = typer.Option(
        10.0, "--stop-timeout", help="Seconds a forwarded SIGTERM/SIGINT may take before SIGKILL."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print a JSON result on stdout (the command's stdout goes to stderr)."
    ),
) -> None:
    """Run CMD with its own tmpfs /dev/shm of SIZE and optional memory/CPU limits.

    The exit status is the command's (128+N when signal N killed it). Nothing is left mounted,
    created or running afterwards.
    """
    from shmguard.measure.sandbox import Sandbox, SandboxError, SandboxSpec

    shm = size_option(shm_size, "--shm-size")
    mem = size_option(memory, "--memory")
    _positive(stop_timeout, "--stop-timeout")
    argv = _check_command(command)
    _limits(shm, mem, cpus)
    assert shm is not None
    spec = SandboxSpec(tuple(argv), shm, memory_limit=mem, cpus=cpus, account_memory=True)
    output = "tee" if json_out else "inherit"
    try:
        with Sandbox(spec, output=output, stdout_fd=2) as box:
            box.start()
            result = box.wait(stop_grace=stop_timeout)
    except SandboxError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)
    if result.exec_error:
        sys.stderr.write(f"shmguard: error: {result.exec_error}\n")
    if result.stopped_by:
        sys.stderr.write(f"shmguard: stopped the command: {result.stopped_by}\n")
    if result.oom_kills and mem is not None:
        from shmguard.units import format_iec

        n = result.oom_kills
        sys.stderr.write(
            f"shmguard: the memory cgroup's OOM killer killed {n} process{'es' if n > 1 else ''}"
            f" (--memory {format_iec(mem)}; tmpfs pages count against it)\n"
        )
    if json_out:
        from shmguard.render.json import dumps

        body = {
            "command": argv,
            "shm_size": shm,
            "memory_limit": mem,
            "cpus": cpus,
            "exit_status": result.exit_status,
            "exit_code": result.exit_code,
            "signal": result.signal_name,
            "stopped_by": result.stopped_by,
            "exec_error": result.exec_error,
            "memory_peak": result.memory_peak,
            "proc_remounted": result.proc_remounted,
            "user_namespace": result.user_namespace,
            "wall_time": round(result.wall_time, 3),
            "leftovers": result.leftovers,
            "oom_kills": result.oom_kills,
        }
        sys.stdout.write(dumps("sandbox", body) + "\n")
    raise typer.Exit(result.exit_status)


def _measure_body(result: Any) -> dict[str, Any]:
    from shmguard.render.measure_text import thin_samples

    tl = result.timeline
    return {
        "command": list(result.command),
        "shm_size": result.shm_size,
        "memory_limit": result.memory_limit,
        "cpus": result.cpus,
        "exit_status": result.exit_status,
        "signal": result.signal,
        "stopped_by": result.stopped_by,
        "cause": result.cause,
        "peak": result.peak,
        "peak_at": round(result.peak_at, 4),
        "baseline": result.baseline,
        "owners_at_peak": result.owners_at_peak,
        "rss_peak": result.rss_peak,
        "memory_peak": result.memory_peak,
        "wall_time": round(result.wall_time, 3),
        "sampling": {
            "interval": tl.interval,
            "samples": tl.n_samples,
            "mean_interval": round(tl.mean_interval, 6),
            "max_gap": round(tl.max_gap, 6),
            "realtime": tl.realtime,
            "owner_scans": len(tl.owners),
            "errors": list(tl.errors),
        },
        "timeline": [[round(t, 4), u] for t, u in thin_samples(tl)],
        "recommendation": result.recommendation,
    }


@app.command(context_settings=_CTX)
def measure(
    command: _Command = None,
    shm_size: str | None = typer.Option(
        None,
        "--shm-size",
        metavar="SIZE",
        help="Sandbox /dev/shm size (default: half of RAM, at least 1 GiB).",
    ),
    memory: str | None = typer.Option(
        None, "--memory", metavar="SIZE", help="Memory limit for the run."
    ),
    cpus: float | None = typer.Option(None, "--cpus", help="CPU quota for the run."),
    headroom: str = typer.Option(
        "25%", "--headroom", metavar="PCT", help="Added to the peak for the recommendation."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Kill the run after this many seconds."
    ),
    hang_after: float = typer.Option(
        5.0, "--hang-after", help="Seconds of full /dev/shm and no progress that count as a hang."
    ),
    interval_ms: float = typer.Option(2.0, "--interval", help="statvfs poll interval in ms."),
    json_out: bool = typer.Option(
        False, "--json", help="JSON on stdout (the command's stdout then goes to stderr)."
    ),
    plot: _Plot = None,
) -> None:
    """Run CMD in a sandbox, report its peak /dev/shm, cause of death and the sizes to ship.

    Exit status: 0 when the command succeeded, 1 when it failed (the cause is reported), 2 for
    usage errors or a sandbox that cannot be set up.
    """
    from shmguard.measure.run import measure_command
    from shmguard.measure.sandbox import SandboxError

    shm = size_option(shm_size, "--shm-size")
    mem = size_option(memory, "--memory")
    _positive(timeout, "--timeout")
    _positive(hang_after, "--hang-after")
    _positive(interval_ms, "--interval")
    if not _INTERVAL_MS[0] <= interval_ms <= _INTERVAL_MS[1]:
        low, high = _INTERVAL_MS
        fail(f"--interval: must be from {low:g} to {high:g} ms, got {interval_ms:g}")
    room = _percent(headroom, "--headroom")
    argv = _check_command(command)
    _limits(shm, mem, cpus)
    if plot is not None:
        _check_plot(plot)
    try:
        result = measure_command(
            argv,
            shm_size=shm,
            memory_limit=mem,
            cpus=cpus,
            interval=interval_ms / 1000,
            headroom=room,
            timeout=timeout,
            hang_after=hang_after,
            output="tee",
            stdout_fd=2 if json_out else 1,
        )
    except SandboxError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)
    if plot is not None:
        _write_plot(result, plot)
    if json_out:
        from shmguard.render.json import dumps

        sys.stdout.write(dumps("measure", _measure_body(result)) + "\n")
    else:
        from shmguard.render.measure_text import measure_report

        sys.stdout.flush()
        _print(measure_report(result))
    if result.interrupted and not result.passed:
        # The user stopped it (Ctrl-C, SIGTERM): the partial report is shown, the status says so.
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if result.passed else EXIT_FINDINGS)


def _check_plot(path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        fail("--plot needs matplotlib: pip install 'shmguard[plot]'")
    # Checked before the run: afterwards a bad name would cost the whole measurement.
    if path.is_dir():
        fail(f"--plot {path}: is a directory; give a file name such as shm.png")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        # matplotlib would append .png to a name without a suffix (another file than asked
        # for) and raise ValueError for an unknown one.
        shown = path.suffix or "(no suffix)"
        fail(f"--plot {path}: unknown image format {shown}; use .png, .svg or .pdf")
    parent = path.resolve().parent
    if not parent.is_dir():
        fail(f"--plot: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        fail(f"--plot: directory {parent} is not writable")


def _write_plot(result: Any, path: Path) -> None:
    from shmguard.render.plot import PlotUnavailable, plot_timeline

    try:
        plot_timeline(
            result.timeline,
            path,
            limit=result.shm_size if result.shm_size < 4 * max(result.peak, 1) else None,
            recommended=result.recommendation.shm_size,
            title=f"/dev/shm used: {' '.join(result.command)[:60]}",
        )
    except (PlotUnavailable, OSError, ValueError) as err:
        fail(f"--plot {path}: {err}")


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
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from shmguard.cli._common import use_color
    from shmguard.measure.probe import probe_command

    err_console = Console(stderr=True, no_color=not use_color(), highlight=False)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        observer = _ProgressObserver(progress, estimate=1 + 5 + kwargs.get("confirm", 3))
        result = probe_command(argv, observer=observer, **kwargs)
        progress.advance(observer.task)
    return result


def _probe_body(result: Any) -> dict[str, Any]:
    return {
        "command": list(result.command),
        "measure": _measure_body(result.measure),
        "floor": result.floor,
        "tolerance": result.tolerance,
        "confirm": result.confirm,
        "minimum": result.minimum,
        "minimum_basis": result.minimum_basis,
        "trials": [{**_trial_dict(t)} for t in result.trials],
        "pass_rates": result.pass_rates,
        "recommendation": result.recommendation,
        "verified": result.verified,
        "runs": result.runs,
        "wall_time": round(result.wall_time, 3),
    }


def _trial_dict(trial: Any) -> dict[str, Any]:
    from shmguard.render.json import to_data

    data: dict[str, Any] = to_data(trial)
    data["wall_time"] = round(trial.wall_time, 3)
    return data


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
        "5%", "--tolerance", metavar="PCT", help="Resolution of the bisection."
    ),
    confirm: int = typer.Option(3, "--confirm", help="Passes in a row required at the minimum."),
    trial_timeout: float | None = typer.Option(
        None, "--trial-timeout", help="Seconds per trial (default 3x the measuring run, >= 30)."
    ),
    hang_after: float = typer.Option(
        5.0, "--hang-after", help="Seconds of full /dev/shm and no progress that count as a hang."
    ),
    headroom: str = typer.Option(
        "25%", "--headroom", metavar="PCT", help="Added for the recommendation."
    ),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Run the recommended size once."
    ),
    json_out: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Find the smallest /dev/shm size at which CMD reliably succeeds (bisection).

    Exit status: 0 when a minimum was found, 1 when the command fails even at the ceiling or no
    size passed reliably, 2 for usage errors.
    """
    from shmguard.measure.sandbox import SandboxError

    low = size_option(floor, "--floor", allow_zero=True) or 0
    top = size_option(ceiling, "--ceiling")
    tol = _percent(tolerance, "--tolerance")
    if not 0 < tol < 1:
        fail(f"--tolerance: must be between 0% and 100%, got {tolerance!r}")
    if not 1 <= confirm <= _MAX_CONFIRM:
        fail(f"--confirm: must be from 1 to {_MAX_CONFIRM}, got {confirm}")
    _positive(trial_timeout, "--trial-timeout")
    _positive(hang_after, "--hang-after")
    room = _percent(headroom, "--headroom")
    if top is not None and low >= top:
        fail("--floor must be below --ceiling")
    argv = _check_command(command)
    from shmguard.measure.sandbox import RunInterrupted

    try:
        result = _run_probe(
            argv,
            floor=low,
            ceiling=top,
            tolerance=tol,
            confirm=confirm,
            trial_timeout=trial_timeout,
            hang_after=hang_after,
            headroom=room,
            verify=verify,
        )
    except SandboxError as err:
        fail(str(err))
    except RunInterrupted as err:
        fail(str(err), EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)
    if json_out:
        from shmguard.render.json import dumps

        sys.stdout.write(dumps("probe", _probe_body(result)) + "\n")
    else:
        from shmguard.render.measure_text import probe_report

        _print(probe_report(result))
    raise typer.Exit(EXIT_OK if result.minimum is not None else EXIT_FINDINGS)


@app.command()
def demo(
    batches: int = typer.Option(20, "--batches", help="Batches per run of the example loader."),
) -> None:
    """Reproduce the classic DataLoader /dev/shm failure, explain it, size it and print the fix.

    Runs the bundled image-classification loader (3x224x224 float32, batch 32, 4 workers) in a
    64 MiB sandbox (Docker's default), then probes the smallest size that works. Needs PyTorch.
    About a minute on 2 cores.
    """
    import importlib.util

    from rich.rule import Rule
    from rich.text import Text

    from shmguard.examples import __file__ as examples_init
    from shmguard.measure.run import measure_command
    from shmguard.measure.sandbox import RunInterrupted, SandboxError
    from shmguard.render.measure_text import (
        command_line,
        demo_explanation,
        probe_report,
    )
    from shmguard.units import DOCKER_DEFAULT_SHM, format_iec

    if batches < 1:
        fail(f"--batches: must be at least 1, got {batches}")
    if importlib.util.find_spec("torch") is None:
        fail("demo needs PyTorch: pip install torch==2.13.0 'shmguard[torch]'")
    script = Path(examples_init).with_name("seed_loader.py")
    # 0.1 s of fake training per batch: the prefetch queue fills as it does in real training
    # (a loop that does no work is production-limited and needs less; torch_shm.md section 3).
    argv = [sys.executable, str(script), "--batches", str(batches), "--step-time", "0.1", "--quiet"]
    con: Any = console()
    con.print(
        Rule("1. A typical image-classification DataLoader in Docker's default 64 MiB /dev/shm")
    )
    con.print(Text(f"$ shmguard sandbox --shm-size 64m -- {command_line(argv)}", style="dim"))
    try:
        failure = measure_command(
            argv, shm_size=DOCKER_DEFAULT_SHM, output="capture", timeout=90, hang_after=5.0
        )
    except SandboxError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)
    if failure.interrupted:
        fail(str(RunInterrupted(failure.interrupted)), EXIT_INTERRUPTED)
    verdict = "failed" if not failure.passed else "passed (unexpected)"
    con.print(
        f"Result: {verdict}: {failure.cause.outcome.value}, exit status {failure.exit_status}, "
        f"after {failure.wall_time:.1f} s; /dev/shm peak {format_iec(failure.peak)} of 64 MiB."
    )
    for line in failure.cause.evidence[:2]:
        con.print(Text(f"  {line}", style="red"))
    con.print(Rule("2. Why"))
    if failure.passed:
        con.print("This run got lucky (the edge is random for fast consumers); it usually fails.")
    con.print(demo_explanation(failure, 32 * 3 * 224 * 224 * 4, 4, 2))
    con.print(Rule("3. The smallest /dev/shm that works (shmguard probe)"))
    try:
        result = _run_probe(argv, hang_after=5.0)
    except SandboxError as err:
        fail(str(err))
    except RunInterrupted as err:
        fail(str(err), EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)
    con.print(probe_report(result))
    con.print(Rule("4. The fix"))
    rec = result.recommendation
    if rec.shm_size is not None:
        con.print(
            f"Give the container {format_iec(rec.shm_size)} of /dev/shm (the snippets above), or "
            "keep 64 MiB and ship uint8 images from the workers (examples/fits_loader.py needs "
            "about 42 MiB), or lower num_workers x prefetch_factor."
        )
    raise typer.Exit(EXIT_OK)

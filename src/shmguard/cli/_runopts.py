"""Options and checks shared by ``sandbox``, ``measure``, ``probe`` and ``demo``: the command
after ``--``, limits, percentages, ``--plot``, and the exit status for an interrupted run."""

import contextlib
import math
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from shmguard.cli._common import console, fail, info_line

#: Shell convention for "ended by SIGINT".
EXIT_INTERRUPTED = 130
#: Everything from the first word of CMD on is CMD's (so `-- python x.py --lr 1` and, without
#: `--`, `python x.py --lr 1` work); an unknown option *before* CMD is a usage error (it used to
#: become the command: `measure --quiet -- x` said "command not found: --quiet").
_CTX = {"allow_interspersed_args": False}
_CMD_HELP = "The command to run, after `--` (e.g. `-- python train.py`)."
_Command = Annotated[
    Optional[list[str]],  # noqa: UP045 - Typer evaluates this at runtime on Python 3.10
    typer.Argument(metavar="-- CMD ...", help=_CMD_HELP),
]
#: ``--memory`` and ``--cpus`` of measure and probe (one definition: the same words in both).
_Memory = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--memory",
        metavar="SIZE",
        help="Memory limit for each sandboxed run (tmpfs pages count against it).",
    ),
]
_Cpus = Annotated[
    Optional[float],  # noqa: UP045
    typer.Option("--cpus", help="CPU quota for each sandboxed run, in CPUs (CFS bandwidth)."),
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


def _within_memory(size: int | None, flag: str) -> None:
    """Warn when a tmpfs of ``size`` bytes is more than the machine's RAM and swap: a warning,
    not a refusal, because the kernel and Docker accept it (a tmpfs size reserves nothing)."""
    from shmguard.inspect.system import read_meminfo
    from shmguard.measure.cgroups import shm_beyond_memory
    from shmguard.units import format_iec

    if size is None:
        return
    mem = read_meminfo(Path("/"))
    problem = shm_beyond_memory(size, mem.total.value, mem.swap_total.value)
    if problem is not None:
        sys.stderr.write(
            f"shmguard: warning: {flag} {format_iec(size)} {problem}; running it anyway (a "
            "tmpfs size reserves nothing)\n"
        )


def _limits(shm: int | None, memory: int | None, cpus: float | None) -> None:
    """Refuse limits Docker would refuse; warn when --shm-size is more than the machine's
    memory or --memory cannot hold a full /dev/shm."""
    from shmguard.measure.cgroups import available_cpus, check_limits
    from shmguard.units import format_iec

    _positive(cpus, "--cpus")
    problem = check_limits(memory, None)
    if problem is not None:
        fail(f"--memory: {problem.removeprefix('memory limit ')}")
    problem = check_limits(None, cpus, available_cpus())
    if problem is not None:
        fail(f"--cpus: {problem.removeprefix('cpus ')}")
    _within_memory(shm, "--shm-size")
    if memory is not None and shm is not None and memory <= shm:
        sys.stderr.write(
            f"shmguard: warning: --memory {format_iec(memory)} is not above --shm-size "
            f"{format_iec(shm)}: tmpfs pages count against the memory limit, so the job is "
            "OOM-killed before /dev/shm can fill\n"
        )


def _duration(text: str | None, flag: str) -> float | None:
    """Parse a duration option (``30s``, ``2m``, ``1m30s``, seconds), or exit 2 with one line."""
    from shmguard.units import DurationError, parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as err:
        fail(f"{flag}: {err}")


#: Largest --confirm: probe stops after 30 trials, and more than 10 passes in a row at one size
#: would leave too few for the bisection.
_MAX_CONFIRM = 10
#: Bounds of --interval in ms: below 0.1 ms the sampler would spin a core (with SCHED_FIFO).
_INTERVAL_MS = (0.1, 1000.0)


@contextlib.contextmanager
def _sandbox_errors() -> Iterator[None]:
    """Around a sandboxed run: a sandbox that cannot be set up exits 2 with its message; a run
    the user interrupted (Ctrl-C, SIGTERM; probe's RunInterrupted) exits 130, torn down."""
    from shmguard.measure.sandbox import RunInterrupted, SandboxError

    try:
        yield
    except SandboxError as err:
        fail(str(err))
    except RunInterrupted as err:
        fail(str(err), EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        fail("interrupted; the sandbox was torn down", EXIT_INTERRUPTED)


def _print(parts: Any) -> None:
    """Print a report's parts on stdout: commands and snippets verbatim, never wrapped."""
    from shmguard.render.parts import print_parts

    print_parts(console(), parts)


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


def save_plot(draw: Callable[[], object], path: Path, what: str) -> None:
    """Run ``draw`` (which writes ``path``); exit 2 naming --plot when it cannot, else say
    on stderr that ``what`` was written (with --json, stdout carries only the document)."""
    from shmguard.render.plot import PlotUnavailable

    try:
        draw()
    except (PlotUnavailable, OSError, ValueError) as err:
        fail(f"--plot {path}: {err}")
    info_line(f"wrote {what} to {path.resolve()}")


def _write_plot(result: Any, path: Path) -> None:
    from shmguard.render.plot import plot_timeline

    def draw() -> None:
        plot_timeline(
            result.timeline,
            path,
            limit=result.shm_size if result.shm_size < 4 * max(result.peak, 1) else None,
            recommended=result.recommendation.shm_size,
            title=f"/dev/shm used: {' '.join(result.command)[:60]}",
        )

    save_plot(draw, path, "the /dev/shm timeline")

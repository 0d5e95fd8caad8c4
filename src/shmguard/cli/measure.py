"""``shmguard sandbox | measure``: run a real command under a private /dev/shm and measure it.

Thin: parse arguments, call :mod:`shmguard.measure`, render, exit. Heavy imports (Rich, psutil,
matplotlib) happen inside the command bodies.
"""

from __future__ import annotations

import sys

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, error_line, fail, info_line, size_option
from shmguard.cli._config import settings
from shmguard.cli._runopts import (
    _CTX,
    _INTERVAL_MS,
    EXIT_INTERRUPTED,
    _check_command,
    _check_plot,
    _Command,
    _Cpus,
    _limits,
    _Memory,
    _percent,
    _Plot,
    _positive,
    _print,
    _sandbox_errors,
    _write_plot,
)


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
    from shmguard.measure.sandbox import Sandbox, SandboxSpec

    shm = size_option(shm_size, "--shm-size")
    mem = size_option(memory, "--memory")
    _positive(stop_timeout, "--stop-timeout")
    argv = _check_command(command)
    _limits(shm, mem, cpus)
    assert shm is not None
    spec = SandboxSpec(tuple(argv), shm, memory_limit=mem, cpus=cpus, account_memory=True)
    output = "tee" if json_out else "inherit"
    with _sandbox_errors(), Sandbox(spec, output=output, stdout_fd=2) as box:
        box.start()
        result = box.wait(stop_grace=stop_timeout)
    if result.exec_error:
        error_line(result.exec_error)
    if result.stopped_by:
        info_line(f"stopped the command: {result.stopped_by}")
    if result.oom_kills and mem is not None:
        from shmguard.units import format_iec

        n = result.oom_kills
        sys.stderr.write(
            f"shmguard: the memory cgroup's OOM killer killed {n} process{'es' if n > 1 else ''}"
            f" (--memory {format_iec(mem)}; tmpfs pages count against it)\n"
        )
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import sandbox_body

        sys.stdout.write(dumps("sandbox", sandbox_body(spec, result)) + "\n")
    raise typer.Exit(result.exit_status)


@app.command(context_settings=_CTX)
def measure(
    command: _Command = None,
    shm_size: str | None = typer.Option(
        None,
        "--shm-size",
        metavar="SIZE",
        help="Sandbox /dev/shm size (default: half of RAM, at least 1 GiB).",
    ),
    memory: _Memory = None,
    cpus: _Cpus = None,
    headroom: str | None = typer.Option(
        None,
        "--headroom",
        metavar="PCT",
        help="Added to the peak for the recommendation "
        "[default: the configuration's sizes.headroom, else 25%].",
        show_default=False,
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

    shm = size_option(shm_size, "--shm-size")
    mem = size_option(memory, "--memory")
    _positive(timeout, "--timeout")
    _positive(hang_after, "--hang-after")
    _positive(interval_ms, "--interval")
    if not _INTERVAL_MS[0] <= interval_ms <= _INTERVAL_MS[1]:
        low, high = _INTERVAL_MS
        fail(f"--interval: must be from {low:g} to {high:g} ms, got {interval_ms:g}")
    conf = settings(None)
    room = _percent(headroom, "--headroom") if headroom is not None else None
    argv = _check_command(command)
    _limits(shm, mem, cpus)
    if plot is not None:
        _check_plot(plot)
    with _sandbox_errors():
        result = measure_command(
            argv,
            shm_size=shm,
            memory_limit=mem,
            cpus=cpus,
            interval=interval_ms / 1000,
            headroom=room,
            policy=conf.policy,
            timeout=timeout,
            hang_after=hang_after,
            output="tee",
            stdout_fd=2 if json_out else 1,
        )
    if plot is not None:
        _write_plot(result, plot)
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import measure_body

        sys.stdout.write(dumps("measure", measure_body(result)) + "\n")
    else:
        from shmguard.render.measure_text import measure_report

        sys.stdout.flush()
        _print(measure_report(result))
    if result.interrupted and not result.passed:
        # The user stopped it (Ctrl-C, SIGTERM): the partial report is shown, the status says so.
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if result.passed else EXIT_FINDINGS)

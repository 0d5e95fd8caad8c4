"""`shmguard run`: a container entrypoint. Print the doctor banner, refuse to start when
``--require`` is not met, then ``exec`` the command, or with ``--watch`` stay as a minimal init
beside it and diagnose a failure or a stall. Docs: docs/run.md.

Everything shmguard prints goes to stderr: the command's stdout stays its own.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from shmguard.cli._app import app
from shmguard.cli._common import console, error_line, size_option
from shmguard.cli._config import ConfigOption, settings
from shmguard.cli._runopts import _CTX, _Command, _positive

if TYPE_CHECKING:
    from rich.console import Console

    from shmguard.estimate.policy import Policy

#: Shell and ``docker run`` convention: the command cannot be found / cannot be executed.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
#: ``--require`` not met (also doctor's status for the ENV002 error it raises).
EXIT_REQUIRE = 1


def _stop(message: str, code: int) -> NoReturn:
    error_line(message)
    raise typer.Exit(code)


def _flush_std() -> None:
    """Flush stdout and stderr before the command takes over; either is None when shmguard
    was started with that fd closed (``>&-``), and the command then inherits it closed."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _resolve(command: list[str] | None) -> list[str]:
    """The command, or one line and exit 127 (none given, not found) or 126 (not
    executable): what a shell or ``docker run`` reports for a command it cannot start."""
    if not command:
        _stop("no command given; put it after `--`, e.g. `-- python train.py`", EXIT_NOT_FOUND)
    prog = command[0]
    if "/" in prog:
        if not os.path.exists(prog):
            _stop(f"command not found: {prog}", EXIT_NOT_FOUND)
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            _stop(f"command is not executable: {prog}", EXIT_NOT_EXECUTABLE)
    elif shutil.which(prog) is None:
        _stop(f"command not found: {prog} (not on PATH)", EXIT_NOT_FOUND)
    return list(command)


def _err_console() -> Console:
    """The console on stderr (cli/_output.py): colour only when stderr is a terminal and
    NO_COLOR is not set."""
    return console(stderr=True)


@app.command(context_settings=_CTX)
def run(
    command: _Command = None,
    require: Annotated[
        str | None,
        typer.Option(
            "--require",
            metavar="SIZE",
            help="Free /dev/shm the job needs (64m, 1g, 512Mi); less: exit 1 with the fix, "
            "without starting CMD.",
        ),
    ] = None,
    brief: Annotated[
        bool,
        typer.Option(
            "--brief",
            help="One line (/dev/shm size, free, runtime, verdict) instead of the banner.",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Stay as a minimal init beside CMD (forward signals, reap zombies, pass output "
            "through) with the /dev/shm sampler; diagnose a failure, stop a stall.",
        ),
    ] = False,
    stall_after: Annotated[
        float,
        typer.Option(
            "--stall-after",
            metavar="SECONDS",
            help="With --watch: seconds with /dev/shm full, an allocation failed and no "
            "progress before CMD is stopped (exit 124).",
        ),
    ] = 60.0,
    stop_timeout: Annotated[
        float,
        typer.Option(
            "--stop-timeout",
            metavar="SECONDS",
            help="With --watch: seconds between the SIGTERM and the SIGKILL of a stalled CMD.",
        ),
    ] = 10.0,
    config: ConfigOption = None,
) -> None:
    """Container entrypoint: print the /dev/shm banner on stderr, check --require, then exec CMD.

    Exit status: CMD's own (it replaces shmguard; with --watch, 128+N when signal N killed
    it, 124 when shmguard stopped it for a stall), 1 when --require is not met, 127/126 when
    CMD cannot be found/executed, 2 for usage errors.
    """
    from pathlib import Path

    from shmguard.measure.execute import hold_signals

    # First: a `docker stop` during the banner is then kept, not lost (see _not_stopped).
    held = hold_signals()

    from shmguard.inspect.host import inspect_host
    from shmguard.lint.doctor import DoctorOptions, diagnose
    from shmguard.render.parts import print_parts
    from shmguard.render.run_text import (
        banner_parts,
        brief_line,
        require_failure_parts,
        require_met,
    )

    needed = size_option(require, "--require")
    _positive(stall_after, "--stall-after")
    _positive(stop_timeout, "--stop-timeout")
    conf = settings(config)
    argv = _resolve(command)
    facts = inspect_host(Path("/"))
    report = diagnose(facts, DoctorOptions(require=needed, policy=conf.policy), config=conf)
    err = _err_console()
    if brief:
        from rich.text import Text

        err.print(Text(brief_line(report, needed)), soft_wrap=True)
    else:
        print_parts(err, banner_parts(report, needed))
    if not require_met(report, needed):
        assert needed is not None
        print_parts(err, require_failure_parts(report, needed, argv, snippets=brief))
        raise typer.Exit(EXIT_REQUIRE)
    _not_stopped(argv)
    _flush_std()
    if not watch:
        from shmguard.measure.execute import exec_command

        try:
            exec_command(argv, held)
        except OSError as e:
            code = EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_NOT_EXECUTABLE
            _stop(f"{argv[0]}: {e.strerror or e}", code)
    _watch(argv, err, facts.runtime.name, conf.policy, stall_after, stop_timeout)


def _not_stopped(argv: list[str]) -> None:
    """Exit ``128+N`` without starting the command when stop signal N (``docker stop``,
    Ctrl-C) arrived while the banner was being made."""
    from shmguard.measure.execute import pending_stop, signal_name
    from shmguard.render.run_text import command_text

    sig = pending_stop()
    if sig is not None:
        if sys.stderr is not None:
            sys.stderr.write(
                f"shmguard run: {signal_name(sig)} received before the command started; "
                f"not starting {command_text(argv)}\n"
            )
        raise typer.Exit(128 + sig)


def _watch(
    argv: list[str],
    err: Console,
    runtime: str,
    policy: Policy,
    stall_after: float,
    stop_timeout: float,
) -> NoReturn:
    from shmguard.measure.watched import StallReport, explain_runtime, watch_command
    from shmguard.render.run_text import print_end, print_stall

    def on_stall(report: StallReport) -> None:
        print_stall(err, report, argv, stop_timeout)

    result = watch_command(
        argv,
        stall_after=stall_after,
        stop_grace=stop_timeout,
        runtime=explain_runtime(runtime),
        policy=policy,
        on_stall=on_stall,
    )
    print_end(err, result)
    raise typer.Exit(result.exit_status)

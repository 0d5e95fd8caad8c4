"""Helpers shared by the command modules: size options, one-line errors, exit codes, the
configuration. Typer is imported only to exit (:func:`fail`): ``shmguard check FILE`` runs
without it (cli/_fast.py)."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, NoReturn

from shmguard.cli._output import no_color_requested as no_color_requested  # (lived here)
from shmguard.cli._output import use_color as use_color
from shmguard.units import SizeError, parse_size_flag

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from shmguard.config import Config

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def error_line(message: str) -> None:
    """Print ``shmguard: error: <message>`` on stderr (one line) and go on: for an error that
    does not stop the command (one unreadable file of several with ``explain --per-file``).
    Nothing is printed when stderr is closed (``2>&-``: Python's ``sys.stderr`` is None) or
    cannot be written (``2>/dev/full``): the command goes on to its output and exit status."""
    info_line(f"error: {message}")


def info_line(message: str) -> None:
    """Print ``shmguard: <message>`` on stderr (one line), as :func:`error_line` does: its
    control characters escaped (render/escape.py), so a file name or a message read from a
    log cannot start a line of its own."""
    from shmguard.render.escape import printable

    if sys.stderr is None:
        return
    try:
        sys.stderr.write(f"shmguard: {printable(message)}\n")
        sys.stderr.flush()
    except OSError:  # ENOSPC, EIO: nowhere to say it
        pass


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``shmguard: error: <message>`` on stderr (one line) and exit with ``code``
    (``typer.Exit``, which the fast path of cli/_fast.py turns into the same exit)."""
    import typer

    error_line(message)
    raise typer.Exit(code)


def settings(path: Path | None) -> Config:
    """:func:`shmguard.lint.settings.load_config` of ``path`` (``--config``) or of the current
    directory upward; a bad file exits 2 with its one-line error."""
    from shmguard.config import ConfigError
    from shmguard.lint.settings import load_config

    try:
        if path is not None and not path.exists():
            fail(f"--config {path}: no such file")
        if path is not None and path.is_dir():
            fail(f"--config {path}: is a directory, not a configuration file")
        return load_config(path=path)
    except ConfigError as err:
        fail(str(err))


def stop_on_signal() -> threading.Event:
    """An event set by SIGTERM or SIGINT (for a server command's foreground: install it before
    saying the server is up, so a signal sent on that line is not lost)."""
    import signal

    done = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    # A parent that waits for them with sigtimedwait (the sandbox, some init systems) passes
    # its blocked mask on: unblocked, or the server would stop only for SIGKILL.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    return done


def size_option(text: str | None, flag: str, *, allow_zero: bool = False) -> int | None:
    """Parse a size given on the command line, or exit 2 with a one-line error naming ``flag``."""
    if text is None:
        return None
    try:
        return parse_size_flag(text, allow_zero=allow_zero)
    except SizeError as err:
        fail(f"{flag}: {err}")


def console(*, stderr: bool = False) -> Console:
    """The Rich console a command prints on (cli/_output.py: the one output layer)."""
    from shmguard.cli._output import console as make

    return make(stderr=stderr)

"""Command line: parse arguments -> call the library -> render -> exit status. Nothing else.

Each command lives in its own module and registers itself on :data:`shmguard.cli._app.app`.
Command modules import heavy libraries (Rich, torch, matplotlib) inside the command body, so
``shmguard doctor --json`` starts fast. ``shmguard check`` with plain arguments runs without
Typer at all (cli/_fast.py); the application is loaded on first use (:func:`_load`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def _load() -> typer.Typer:
    """The whole application, every command module imported (each adds its commands to it)."""
    try:  # Ctrl-C while the commands load: one line and exit 130, as once they run
        # Registration side effects: each module adds its commands to ``app``.
        from shmguard.cli import _check_command as _check  # noqa: F401
        from shmguard.cli import doctor as _doctor  # noqa: F401
        from shmguard.cli import explain as _explain  # noqa: F401
        from shmguard.cli import exporter as _exporter  # noqa: F401
        from shmguard.cli import measure as _measure  # noqa: F401
        from shmguard.cli import plan as _plan  # noqa: F401
        from shmguard.cli import policy as _policy  # noqa: F401
        from shmguard.cli import probe as _probe  # noqa: F401
        from shmguard.cli import recommend as _recommend  # noqa: F401
        from shmguard.cli import run as _run  # noqa: F401
        from shmguard.cli import tune as _tune  # noqa: F401
        from shmguard.cli import watch as _watch  # noqa: F401
        from shmguard.cli import webhook as _webhook  # noqa: F401
        from shmguard.cli._app import app
    except KeyboardInterrupt:
        sys.stderr.write("shmguard: interrupted while starting\n")
        raise SystemExit(130) from None
    return app


def __getattr__(name: str) -> Any:
    """``shmguard.cli.app``: the Typer application, loaded on first use, so that a run of
    ``shmguard check FILE`` by the fast path (cli/_fast.py) imports neither Typer nor the
    other commands."""
    if name == "app":
        return _load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point (``shmguard``)."""
    if sys.stdout is not None:
        sys.stdout = _Stdout(sys.stdout)
    try:
        from shmguard.cli._fast import run_fast

        if run_fast(sys.argv[1:]):
            return
        one = _only(sys.argv[1]) if len(sys.argv) > 1 else None
        (one or _load())()
    except KeyboardInterrupt:  # while Typer builds the commands (it handles it once they run)
        sys.stderr.write("shmguard: interrupted while starting\n")
        raise SystemExit(130) from None
    except (OSError, AttributeError) as err:
        why = _unwritable_stdout(err)
        if why is None:
            raise
        import os

        from shmguard.cli._common import EXIT_USAGE, error_line

        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (nothing left to flush at exit)
        error_line(f"cannot write standard output: {why}")
        raise SystemExit(EXIT_USAGE) from None


class _Stdout:
    """``sys.stdout`` as the commands write it: the same stream, whose write and flush errors
    are marked as standard output's (see :func:`_unwritable_stdout`)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """The stream's write; an OSError is marked as standard output's."""
        try:
            return int(self._stream.write(text))
        except OSError as err:
            err.shmguard_stdout = True  # type: ignore[attr-defined]
            raise

    def flush(self) -> None:
        """The stream's flush; an OSError is marked as standard output's."""
        try:
            self._stream.flush()
        except OSError as err:
            err.shmguard_stdout = True  # type: ignore[attr-defined]
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _unwritable_stdout(err: BaseException) -> str | None:
    """Why standard output could not be written, when that is what ``err`` (raised by a
    command) comes from, else None: it was closed when shmguard started (``>&-``: Python's
    ``sys.stdout`` is None, so writing raises AttributeError), or writing it failed
    (``>/dev/full``: ENOSPC; EIO). A closed pipe (EPIPE) is Click's: exit 1 without a word,
    as ``| head`` expects."""
    import errno

    if sys.stdout is None:
        return "it is closed" if isinstance(err, AttributeError) else None
    if not isinstance(err, OSError) or not getattr(err, "shmguard_stdout", False):
        return None
    return None if err.errno == errno.EPIPE else err.strerror or str(err)


def _only(name: str) -> typer.Typer | None:
    """A copy of :data:`app` with only the command ``name`` (and the root callback), or None
    when no command has that name. Typer builds every registered command (the signature and
    the evaluated type hints of each of the 17) before it runs one: about 15 ms of each
    start-up on the development machine, for the 16 not run. The command's parsing, help and
    errors are the same (tests/test_cli_only.py)."""
    import copy

    from typer.main import get_command_name

    app = _load()
    named = [
        c
        for c in app.registered_commands
        if (c.name or get_command_name(c.callback.__name__ if c.callback else "")) == name
    ]
    if not named:
        return None
    one = copy.copy(app)
    one.registered_commands = named
    return one

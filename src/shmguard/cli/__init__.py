"""Command line: parse arguments -> call the library -> render -> exit status. Nothing else.

Each command lives in its own module and registers itself on :data:`shmguard.cli._app.app`.
Command modules import heavy libraries (Rich, torch, matplotlib) inside the command body, so
``shmguard doctor --json`` starts fast.
"""

from __future__ import annotations

import sys

try:  # Ctrl-C while the commands load: one line and exit 130, as once they run
    import typer

    # Registration side effects: each module adds its commands to ``app``.
    from shmguard.cli import check as _check  # noqa: F401
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

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point (``shmguard``)."""
    try:
        one = _only(sys.argv[1]) if len(sys.argv) > 1 else None
        (one or app)()
    except KeyboardInterrupt:  # while Typer builds the commands (it handles it once they run)
        sys.stderr.write("shmguard: interrupted while starting\n")
        raise SystemExit(130) from None


def _only(name: str) -> typer.Typer | None:
    """A copy of :data:`app` with only the command ``name`` (and the root callback), or None
    when no command has that name. Typer builds every registered command (the signature and
    the evaluated type hints of each of the 17) before it runs one: about 15 ms of each
    start-up on the development machine, for the 16 not run. The command's parsing, help and
    errors are the same (tests/test_cli_only.py)."""
    import copy

    from typer.main import get_command_name

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

"""Command line: parse arguments -> call the library -> render -> exit status. Nothing else.

Each command lives in its own module and registers itself on :data:`shmguard.cli._app.app`.
Command modules import heavy libraries (Rich, torch, matplotlib) inside the command body, so
``shmguard doctor --json`` starts fast.
"""

from __future__ import annotations

import sys

try:  # Ctrl-C while the commands load: one line and exit 130, as once they run
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
        app()
    except KeyboardInterrupt:  # while Typer builds the commands (it handles it once they run)
        sys.stderr.write("shmguard: interrupted while starting\n")
        raise SystemExit(130) from None

"""Executing ``shmguard run``'s command: the ``exec`` without ``--watch``, the signals held
while the banner is made, and the statuses of a command that cannot be executed.

Sources: execve(2) (an ignored signal stays ignored and the signal mask is kept across it;
handled signals return to their default), signal(7), and the statuses a shell and ``docker
run`` give a command that cannot be found (127) or executed (126) (docs.docker.com, ``docker
run``, "Exit status").
"""

from __future__ import annotations

import errno
import os
import signal

from shmguard.measure._nsinit import FORWARD

#: Signals that ask the command to stop; forwarding one marks the run as interrupted.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})


def signal_name(sig: int) -> str:
    """``SIGTERM`` for 15; ``signal 64`` for a number without a name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def hold_signals() -> set[int | signal.Signals]:
    """Block the forwarded signals from now on (call first thing): one that arrives while the
    banner is being made stays pending, rather than being lost (PID 1 ignores a signal left at
    its default action) or ending shmguard half-way. Returns the previous mask."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, FORWARD)


def pending_stop() -> int | None:
    """A stop signal (:data:`STOP_SIGNALS`) that is pending, or None."""
    pending = signal.sigpending()
    return next((int(s) for s in sorted(STOP_SIGNALS) if s in pending), None)


def exec_command(argv: list[str], mask: set[int | signal.Signals] | None = None) -> None:
    """Replace this process with ``argv`` (``execvp``), as a shell's ``exec`` does: SIGPIPE and
    SIGXFSZ, which Python ignores and an ``execve`` would leave ignored, get their default
    action back, and the signal mask becomes ``mask`` (the one :func:`hold_signals`
    returned; a mask is inherited across ``execve``). Returns only by raising.

    Raises:
        OSError: the command could not be executed (``FileNotFoundError`` when not found).
    """
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.execvp(argv[0], argv)


def exec_failure(prog: str, err: int) -> tuple[int, str]:
    """(status, message) for an ``execvp`` that failed with ``err``."""
    return (127 if err == errno.ENOENT else 126), f"{prog}: {os.strerror(err)}"

"""Helper threads that never take the signals a sandbox forwards.

A process-directed signal goes to any thread that does not block it. The sandbox waits for
SIGINT/SIGTERM/... with ``sigtimedwait`` in the main thread to forward them; a helper thread
that left them unblocked would receive them instead (and SIGTERM's default action would end
shmguard). Threads inherit the creating thread's mask, so they are created with those signals
blocked.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from shmguard.measure._nsinit import WAIT_SET

#: Signals a sandbox forwards to its command, plus SIGCHLD it waits on.
BLOCKED = frozenset(WAIT_SET)


def start_thread(
    target: Callable[..., Any], *args: Any, name: str | None = None
) -> threading.Thread:
    """Start a daemon thread running ``target(*args)`` with :data:`BLOCKED` blocked."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED)
    try:
        t = threading.Thread(target=target, args=args, daemon=True, name=name)
        t.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return t

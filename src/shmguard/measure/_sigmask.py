"""The main thread's block of the signals a sandbox forwards, shared by every sandbox."""

from __future__ import annotations

import signal
from collections.abc import Iterable


class MainMask:
    """The main thread's block of the signals :meth:`Sandbox.wait` forwards, shared by every
    sandbox there: the first hold blocks them, the last drop brings back the mask from
    before the first hold. (Each sandbox saving and restoring its own mask left them
    blocked when two overlapped and the first ended first: the second restored the first's
    block, and a process started afterwards inherited it.)"""

    def __init__(self, signals: Iterable[int]) -> None:
        self._signals = frozenset(signals)
        self._holds = 0
        self._saved: set[int | signal.Signals] = set()

    def hold(self) -> None:
        if self._holds == 0:
            self._saved = signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)
        self._holds += 1

    def drop(self) -> None:
        self._holds -= 1
        if self._holds == 0:
            # pending SIGCHLDs are dropped rather than delivered to ourselves
            while signal.sigtimedwait({signal.SIGCHLD}, 0) is not None:
                pass
            signal.pthread_sigmask(signal.SIG_SETMASK, self._saved)

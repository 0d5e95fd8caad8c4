"""A loader module that ignores SIGCHLD when imported (the kernel then reaps its children, and
``waitpid`` fails with ECHILD): the fork server must still wait for its trials."""

from __future__ import annotations

import signal

from tune_factories import small

signal.signal(signal.SIGCHLD, signal.SIG_IGN)

#: The factory (tune_factories.small).
loader = small

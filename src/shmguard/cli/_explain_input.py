"""What ``explain`` and ``explain --per-file`` say of an input they cannot read: one module both
import (:mod:`shmguard.cli.explain`, :mod:`shmguard.cli._explain_each`), so their messages are
the same lines."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO


def input_problem(name: str) -> str | None:
    """Why ``name`` is not a log to read, or None when it is a regular file or a pipe: a
    directory, a device (``/dev/zero`` never ends, a terminal waits for typing) or a socket
    is not a log."""
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        return f"{name}: no such file"
    except OSError as err:
        return f"{name}: cannot open: {err.strerror or err}"
    if stat.S_ISDIR(mode):
        return f"{name}: is a directory, not a log file"
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        what = "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
        return f"{name}: is {what}, not a log file (pipe it in with '-' if you mean it)"
    return None


def read_error(reading: list[tuple[str, BinaryIO]], err: OSError) -> str:
    """One line for a read error: the input's name and, where the stream can say, the byte
    offset the read started at."""
    if not reading:
        return f"{err.filename or 'input'}: read error: {err.strerror or err}"
    name, stream = reading[0]
    try:
        where = f" at byte {stream.tell():,}"
    except (OSError, ValueError):
        where = ""
    return f"{name}: read error{where}: {err.strerror or err}"

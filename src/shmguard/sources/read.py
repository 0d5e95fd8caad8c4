"""The one bounded reader: every input ``check`` (and the sources layer) reads goes through
:func:`read_input`: a regular file, ``-`` (standard input), ``/dev/stdin``, a FIFO, a device.

The same cap for all (:data:`~shmguard.sources.text.MAX_BYTES`): at most ``cap + 1`` bytes are
ever read, whatever ``st_size`` says (it is 0 for pipes, FIFOs and devices: ``/dev/zero`` never
ends, ``yes | shmguard check /dev/stdin`` neither). A regular file whose size is already over
the cap is refused without reading; one whose first block holds a NUL (git's binary heuristic,
:data:`~shmguard.sources.text.BINARY_PROBE` bytes) is refused after that block. Nothing raises:
a problem is a :class:`~shmguard.sources.diagnostics.SourceDiagnostic`.

A FIFO or a character device named by path is opened without blocking (``O_NONBLOCK``: opening
a FIFO with no writer would wait forever, fifo(7)) and each wait for data is bounded by
``timeout`` seconds (``check --read-timeout``): a FIFO that no writer ever feeds, or a terminal
nobody types into, is a ``read-timeout`` diagnostic. Standard input (``-``, or a path naming the
same file as descriptor 0) waits as long as its producer takes: ``kubectl get -A -o yaml`` may
print nothing for a minute, and the user is there to press Ctrl-C.
"""

from __future__ import annotations

import os
import select
import stat
import sys
from collections.abc import Callable
from typing import BinaryIO

from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.text import MAX_BYTES, binary_problem

__all__ = ["READ_TIMEOUT", "read_input"]

#: Seconds a FIFO or device named by path may go without delivering data (``--read-timeout``).
READ_TIMEOUT = 10.0

#: Bytes asked of each read(2).
_CHUNK = 1 << 20


def _too_large(path: str, cap: int, size: int | None = None) -> SourceDiagnostic:
    if size is None:  # read past the cap: a pipe, a FIFO or a device says no size
        msg = f"input goes past the {cap:,}-byte limit; not read"
    else:
        msg = f"file is {size:,} bytes, over the {cap:,}-byte limit; not read"
    return SourceDiagnostic(path, None, None, msg, DiagnosticKind.TOO_LARGE)


def _is_stdin(st: os.stat_result) -> bool:
    try:
        std = os.fstat(0)
    except OSError:
        return False
    return (std.st_dev, std.st_ino) == (st.st_dev, st.st_ino)


def read_input(
    path: str, *, cap: int = MAX_BYTES, timeout: float | None = READ_TIMEOUT
) -> bytes | SourceDiagnostic:
    """The bytes of ``path`` (``-``: standard input), at most ``cap``; a diagnostic when it is
    over the cap (``too-large``), binary in its first block (``binary``), delivers nothing for
    ``timeout`` seconds (a FIFO or device named by path; None: wait; ``read-timeout``) or cannot
    be read (``unreadable``: a directory, a missing file, no permission)."""
    try:
        if path == "-":  # sys.stdin, not descriptor 0: a caller (a test) may replace it
            return _read_stream(sys.stdin.buffer, path, cap)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return _unreadable(path, e)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            msg = "cannot read: is a directory"
            return SourceDiagnostic(path, None, None, msg, DiagnosticKind.UNREADABLE)
        if stat.S_ISREG(st.st_mode):
            if st.st_size > cap:
                return _too_large(path, cap, st.st_size)
            return _read_fd(fd, path, cap, None)
        wait = None if _is_stdin(st) else timeout
        return _read_fd(fd, path, cap, wait)
    except OSError as e:
        return _unreadable(path, e)
    finally:
        os.close(fd)


def _unreadable(path: str, e: OSError) -> SourceDiagnostic:
    msg = f"cannot read: {e.strerror or e}"
    return SourceDiagnostic(path, None, None, msg, DiagnosticKind.UNREADABLE)


def _read_stream(stream: BinaryIO, path: str, cap: int) -> bytes | SourceDiagnostic:
    """Read ``stream`` (standard input) to its end or past ``cap``."""
    return _read_chunks(stream.read, path, cap, None)


def _read_fd(fd: int, path: str, cap: int, timeout: float | None) -> bytes | SourceDiagnostic:
    """Read ``fd`` to its end or past ``cap``; with ``timeout``, poll before each read (the
    descriptor stays non-blocking), else block."""
    if timeout is None:
        os.set_blocking(fd, True)
        return _read_chunks(lambda n: os.read(fd, n), path, cap, None)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    wait_ms = max(0, int(timeout * 1000))

    def read(n: int) -> bytes | None:
        try:
            return os.read(fd, n)
        except BlockingIOError:  # woken without data (a terminal): wait again
            return None

    return _read_chunks(read, path, cap, lambda: bool(poller.poll(wait_ms)), timeout)


def _read_chunks(
    read: Callable[[int], bytes | None],
    path: str,
    cap: int,
    wait: Callable[[], bool] | None,
    timeout: float = 0.0,
) -> bytes | SourceDiagnostic:
    """Chunks from ``read`` until it gives ``b""`` (the end) or more than ``cap`` bytes; with
    ``wait``, it is asked first each time (False: ``timeout`` seconds passed without data)."""
    parts: list[bytes] = []
    got = 0
    while got <= cap:
        if wait is not None and not wait():
            msg = (
                f"no data for {timeout:g} s (a FIFO with no writer, or a device that waits); "
                "not read (--read-timeout)"
            )
            return SourceDiagnostic(path, None, None, msg, DiagnosticKind.READ_TIMEOUT)
        chunk = read(min(_CHUNK, cap + 1 - got))
        if chunk is None:
            continue
        if not chunk:
            break
        if not parts:
            problem = binary_problem(chunk, path)
            if problem is not None:
                return problem
        parts.append(chunk)
        got += len(chunk)
    return _too_large(path, cap) if got > cap else b"".join(parts)

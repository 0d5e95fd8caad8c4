"""Wake the sampler when a file in /dev/shm grows, so a short-lived allocation is not missed.

A fixed-interval statvfs poll misses an allocation that is made and freed between two polls:
``fallocate -l 40M /dev/shm/x; rm /dev/shm/x`` measured 30-40 MiB instead of 40 MiB in 4 runs
of 30 with a 2 ms poll. The kernel queues an inotify ``IN_MODIFY`` event on the directory after
``write``, ``truncate`` and a successful ``fallocate`` (``vfs_fallocate`` calls
``fsnotify_modify``; inotify(7)), so a poll made on that event sees the space the call just
took, before the writer can fork the ``rm`` that frees it.

Events come only for files directly in the watched directory and only for system calls, not
for stores through a mapping (PyTorch's blocks grow by page faults after ``ftruncate``); the
periodic poll still covers those. Where inotify is unavailable (no libc symbol, watch limit
reached, not a directory) :func:`open_waker` returns None and the sampler only polls.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import threading
import time

#: inotify(7) masks: a file was modified, closed after writing, or moved in. Creation is left
#: out: an empty new file takes no space, and its event would spend a poll just before the
#: write that matters.
IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
#: What wakes the sampler.
WAKE_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO


class Waker:
    """An inotify descriptor watching one directory.

    Args:
        fd: a non-blocking inotify file descriptor with a watch on the directory; the waker
            owns it and closes it in :meth:`close`.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        # A pipe that wake() writes to, so that a sampler told to stop need not sit out the
        # rest of its interval in select(). wake() and close() take the lock: a write to a
        # closed, perhaps reused, descriptor number could land in another file.
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True (and the queue drained) if an event came or
        :meth:`wake` was called."""
        try:
            ready, _, _ = select.select((self.fd, self._wake_r), (), (), max(timeout, 0.0))
        except (OSError, ValueError):
            time.sleep(max(timeout, 0.0))  # never spin: fall back to a plain poll interval
            return False
        if not ready:
            return False
        if self._wake_r in ready:
            return True
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass
        except OSError:
            pass
        return True

    def wake(self) -> None:
        """Make a :meth:`wait` in progress, or the next one, return at once (no-op after
        :meth:`close`)."""
        with self._lock:
            if self._wake_w >= 0:
                # OSError: the pipe is full, so a wake is pending already.
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Close the descriptors (idempotent)."""
        with self._lock:
            for name in ("fd", "_wake_r", "_wake_w"):
                fd = getattr(self, name)
                if fd >= 0:
                    os.close(fd)
                    setattr(self, name, -1)


def open_waker(directory: str) -> Waker | None:
    """A :class:`Waker` on ``directory``, or None where inotify cannot watch it."""
    try:
        # The process's own symbols include libc's; ctypes.util.find_library would run
        # ldconfig (tens of ms, long enough to miss what the watch is for).
        libc = ctypes.CDLL(None, use_errno=True)
        init1, add_watch = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    fd = init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    if fd >= 1024 or add_watch(fd, os.fsencode(directory), WAKE_MASK) < 0:  # select() limit
        os.close(fd)
        return None
    return Waker(fd)

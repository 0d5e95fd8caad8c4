"""Bounded thread-per-connection serving, shared by shmguard's two HTTP servers (the
webhook's HTTPS server, :mod:`shmguard.fleet.webhook`, and the exporter,
:mod:`shmguard.monitor.exporter`): a cap on connections served at once, a deadline per
connection and the reaper thread that enforces it.

Why threads stay bounded: a connection gets a thread only with a slot
(:meth:`ConnectionLimits.admit`); a connection that has no slot waits in the accept loop (the
others wait in the kernel's listen backlog, bounded by the server's ``request_queue_size``)
or is closed. Why a slow client cannot hold a slot: every connection has a deadline
(:meth:`Deadlines.set`) and the reaper shuts down the socket of any connection past it,
whatever it is blocked in (TLS handshake, request line, headers, body); and when every slot is
taken, a new connection takes the slot of the connection nearest its deadline that is not
being answered (idle, or still sending its request), at once (the cut connection's thread
ends within milliseconds and does not give the slot back): a client that sends its request at once
is served within milliseconds however many slow clients are connected, while a slow client
loses its slot to the next arrival. Only connections whose request was read whole and is
being answered (``busy``) are never taken over.

Standard library only; nothing here knows HTTP.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

#: States of a connection: waiting for its request (or its TLS handshake), reading it, being
#: answered. Only ``BUSY`` connections are kept when a slot is needed.
IDLE, READING, BUSY = "idle", "reading", "busy"


class Deadlines:
    """Open connections, their state and the monotonic time each must be done by."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, tuple[float, str]] = {}
        self._cut: set[socket.socket] = set()
        self._handed: set[socket.socket] = set()

    def set(self, sock: socket.socket, deadline: float, state: str) -> None:
        """Record ``sock``'s deadline (``time.monotonic()`` seconds) and state."""
        with self._lock:
            self._conns[sock] = (deadline, state)

    def get(self, sock: socket.socket) -> float | None:
        """``sock``'s deadline, or None when it is not tracked."""
        with self._lock:
            entry = self._conns.get(sock)
        return entry[0] if entry else None

    def drop(self, sock: socket.socket) -> bool:
        """Forget ``sock`` (its connection ended). True when :meth:`evict` handed its slot
        to a new connection (its thread must not give it back)."""
        with self._lock:
            self._conns.pop(sock, None)
            self._cut.discard(sock)
            handed = sock in self._handed
            self._handed.discard(sock)
            return handed

    def alive(self, sock: socket.socket) -> bool:
        """True while ``sock`` is tracked, before its deadline and not cut by
        :meth:`reap` or :meth:`evict` (what a cut socket read last ended at the cut)."""
        with self._lock:
            entry = self._conns.get(sock)
            return entry is not None and sock not in self._cut and time.monotonic() < entry[0]

    def in_progress(self) -> int:
        """Connections reading a request or being answered (not idle)."""
        with self._lock:
            return sum(1 for _, state in self._conns.values() if state != IDLE)

    def reap(self, now: float, *, idle_too: bool = False, everything: bool = False) -> int:
        """Shut down every connection past its deadline (also every idle one with
        ``idle_too``, every one with ``everything``); returns how many."""
        with self._lock:
            late = [
                s
                for s, (d, state) in self._conns.items()
                if everything or d <= now or (idle_too and state == IDLE)
            ]
            self._cut.update(late)
        for s in late:
            _cut(s)
        return len(late)

    def evict(self) -> bool:
        """Shut down the connection nearest its deadline that is not ``BUSY``; its slot goes
        to the caller at once (its thread, which wakes from its read and ends within
        milliseconds, does not give it back: :meth:`drop`). False when every connection is
        busy."""
        with self._lock:
            waiting = [
                (d, s)
                for s, (d, state) in self._conns.items()
                if state != BUSY and s not in self._cut
            ]
            victim = min(waiting, key=lambda e: e[0])[1] if waiting else None
            if victim is not None:
                self._cut.add(victim)
                self._handed.add(victim)
        if victim is None:
            return False
        _cut(victim)
        return True


def _cut(sock: socket.socket) -> None:
    # the base class's shutdown: an SSLSocket's own would drop its TLS state, and a thread
    # blocked in recv or in the handshake wakes up at once
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class ConnectionLimits:
    """The slots and deadlines of one server, and the reaper thread (started at once;
    :meth:`close` stops it).

    Args:
        max_connections: connections served at once (threads, one each).
        name: the reaper thread's name.
    """

    def __init__(self, max_connections: int, name: str) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.max_connections = max_connections
        self.deadlines = Deadlines()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stop = threading.Event()
        #: Connections closed without being served (no slot within the wait).
        self.refused = 0
        #: Connections cut to free a slot for a new one.
        self.evicted = 0
        #: Reap idle connections too (set while a server shuts down).
        self.idle_too = False
        self._reaper = threading.Thread(target=self._reap, name=name, daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        while not self._stop.wait(0.2):
            self.deadlines.reap(time.monotonic(), idle_too=self.idle_too)

    def admit(self, wait: float = 0.0) -> bool:
        """Take a slot for a new connection: a free one; else the slot of the connection
        :meth:`Deadlines.evict` cuts; else one that frees within ``wait`` seconds. False
        (counted in :attr:`refused`): the caller closes the connection."""
        if self._slots.acquire(blocking=False):
            return True
        if self.deadlines.evict():
            self.evicted += 1
            return True
        end = time.monotonic() + wait
        while (left := end - time.monotonic()) > 0 and not self._stop.is_set():
            if self._slots.acquire(timeout=min(left, 0.2)):
                return True
        self.refused += 1
        return False

    def release(self, sock: socket.socket) -> None:
        """``sock``'s connection ended: forget it and give back its slot (unless
        :meth:`Deadlines.evict` handed it over)."""
        if not self.deadlines.drop(sock):
            self._slots.release()

    def close(self) -> None:
        """Stop the reaper (and any :meth:`admit` waiting)."""
        self._stop.set()


def parse_request_within(
    handler: BaseHTTPRequestHandler, parse: Callable[[], bool], deadlines: Deadlines
) -> bool:
    """``http.server``'s ``parse_request`` for a server on :class:`ConnectionLimits`: an
    HTTP/0.9 request line (two words, no headers) gets 400 at once, since ``http.server`` would
    wait for a blank line that never comes; ``parse`` (the base class's ``parse_request``) reads
    the headers; a connection cut while they came (evicted or past its deadline: they ended at
    the cut, not at a blank line, and nobody waits for the answer) is closed unanswered.
    """
    line: bytes = getattr(handler, "raw_requestline", b"")  # set by handle_one_request
    if len(line.split()) == 2:
        handler.command, handler.request_version = "", "HTTP/1.0"
        handler.requestline = line.decode("iso-8859-1").rstrip("\r\n")
        handler.send_error(400, "HTTP/0.9 requests are not supported")
        return False
    if not parse():
        return False
    if not deadlines.alive(handler.connection):
        handler.close_connection = True
        return False
    return True

"""The admission webhook's HTTPS server: ``POST /mutate``, ``GET /healthz``, ``GET /readyz``.

Standard library only (:mod:`http.server`, :mod:`ssl`). The limits, and why each:

* **Deadline.** Every request, from the accept (the TLS handshake and the wait for the request
  line included) or, on a kept-alive connection, from its first byte, to the end of its
  answer, must finish within :attr:`WebhookServerOptions.request_timeout`: a reaper thread
  shuts down the socket of any that does not. A kept-alive connection waits for its next
  request up to :attr:`WebhookServerOptions.idle_timeout`. The default,
  :data:`DEFAULT_REQUEST_TIMEOUT`, is the webhook configuration's ``timeoutSeconds``
  (:data:`CONFIG_TIMEOUT_SECONDS`, deploy/webhook/mutatingwebhookconfiguration.yaml) minus
  :data:`DEADLINE_MARGIN`: the API server stops waiting at ``timeoutSeconds`` and applies
  ``failurePolicy``, so work past it is wasted and a slot held past it is a slot taken from a
  request that could still be answered in time.
* **Slots.** Each connection gets a thread from :attr:`WebhookServerOptions.max_connections`
  slots (:class:`shmguard.serving.ConnectionLimits`). When all are taken, a new connection
  takes the slot of the connection nearest its deadline that is not being answered (idle, in
  its handshake or still sending its request), chosen over a cap per source address because
  the API server's connections and a slow client can share one address (a node, a proxy), and
  over a second queue because the newcomer is the one most likely to finish: a client that
  sends its whole review at once is answered in milliseconds however many slowloris
  connections are open, and a slow client keeps its slot only until the next arrival. Only
  when every slot is answering a request is the new connection closed (:attr:`refused`; the
  API server then applies ``failurePolicy: Ignore``). The TLS handshake runs in the
  connection's thread, never in the accept loop.
* **Bodies.** ``Content-Length`` must be 1 to :data:`LENGTH_DIGITS` ASCII digits (400
  otherwise; longer runs of digits are over any limit: 413). Bodies over
  :attr:`WebhookServerOptions.max_body` get 413 without being read. Every body is reserved
  against :attr:`WebhookServerOptions.body_budget` (bytes of bodies read or decided at once,
  in all) before it is read; a request that finds no room before its deadline nears gets 503
  (the parsed object of a review takes many times its bytes: the budget is what keeps 48
  concurrent 1.45 MiB reviews under the Deployment's 256Mi). A request whose client is gone
  or whose deadline passed while it waited is not decided.
* **Answers.** Every answer to ``/mutate``, the http.server errors (400, 414, 431, 501, 505)
  included, is an AdmissionReview with the request's uid when it was read; JSON is compact;
  each response is one write (headers and body) on a socket with ``TCP_NODELAY``.

Each decision is logged as one JSON line on the ``shmguard.webhook`` logger (nothing is
printed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from shmguard.fleet.admission import (
    ReviewError,
    WebhookOptions,
    admission_error,
    admission_response,
    decide_admission,
)
from shmguard.fleet.logline import json_line, log_json
from shmguard.fleet.tls import CertReloader
from shmguard.serving import BUSY, IDLE, READING, ConnectionLimits, parse_request_within
from shmguard.units import MiB

log = logging.getLogger("shmguard.webhook")

#: ``timeoutSeconds`` of deploy/webhook/mutatingwebhookconfiguration.yaml: how long the API
#: server waits for an answer before it applies ``failurePolicy`` (tests/fleet checks the two
#: agree).
CONFIG_TIMEOUT_SECONDS = 3
#: Seconds kept between the server's deadline and the API server's: the answer's trip back,
#: and the API server's own connection set-up, which its timeout also covers.
DEADLINE_MARGIN = 0.5


def request_deadline(timeout_seconds: float) -> float:
    """The per-request deadline, in seconds, for a webhook configuration whose
    ``timeoutSeconds`` is ``timeout_seconds``: that minus :data:`DEADLINE_MARGIN`, at least
    half of it (``timeoutSeconds: 3`` gives 2.5 s, ``1`` gives 0.5 s)."""
    return max(timeout_seconds - DEADLINE_MARGIN, timeout_seconds / 2)


#: The default per-request deadline in seconds: 2.5.
DEFAULT_REQUEST_TIMEOUT = request_deadline(CONFIG_TIMEOUT_SECONDS)
#: Most digits of a ``Content-Length`` that is parsed (10**15 bytes is over any limit).
LENGTH_DIGITS = 15
_LENGTH = re.compile(rb"[0-9]+")
#: Seconds before its deadline (at most 40% of the deadline) that a request stops waiting for
#: room in the body budget: what reading and deciding a 1.45 MiB review takes on a busy node
#: (~200 ms for 80,000 environment entries on a loaded 2-CPU machine).
DECIDE_RESERVE = 0.5


@dataclass(frozen=True)
class WebhookServerOptions:
    """The server's address, files and limits.

    Attributes:
        host, port: where to listen (port 0 picks a free one).
        cert, key: the PEM certificate chain and key, reloaded when they change.
        max_body: largest request body in bytes (the API server's objects are at most
            1.5 MiB in etcd by default; a review holds the object and, for updates, the old one).
        body_budget: bytes of request bodies read or decided at once, over every connection
            (at least ``max_body``).
        max_connections: connections served at once (see the module docstring for who gets
            a slot when they are all taken).
        request_timeout: seconds a request may take from its first byte (from the accept,
            for a connection's first: the TLS handshake included) to the end of the response;
            below the webhook configuration's ``timeoutSeconds``.
        idle_timeout: seconds a kept-alive connection may wait for its next request (the
            API server keeps its connections to a webhook open); an idle connection gives
            its slot to a new one whenever the slots are all taken.
        webhook: what the webhook decides (audit mode, excluded namespaces, sizing policy).

    Raises:
        ValueError: ``body_budget`` is below ``max_body``, or a limit is not positive.
    """

    cert: Path
    key: Path
    host: str = "0.0.0.0"
    port: int = 8443
    max_body: int = 4 * MiB
    body_budget: int = 8 * MiB
    max_connections: int = 128
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    idle_timeout: float = 30.0
    webhook: WebhookOptions = field(default_factory=WebhookOptions)

    def __post_init__(self) -> None:
        if min(self.max_body, self.max_connections, self.request_timeout, self.idle_timeout) <= 0:
            raise ValueError("the limits and timeouts must be positive")
        if self.body_budget < self.max_body:
            raise ValueError(
                f"body budget {self.body_budget} is below the largest body {self.max_body}"
            )


def _brief(err: BaseException, *, typed: bool = True) -> str:
    """``err``'s message cut to 200 characters, after its type's name when ``typed``."""
    text = str(err)
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(err).__name__}: {text}" if typed else text


class _Budget:
    """Bytes of request bodies in flight, at most ``total``."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._cond = threading.Condition()

    def reserve(self, n: int, until: float) -> bool:
        """Take ``n`` bytes, waiting until monotonic time ``until`` at most."""
        with self._cond:
            while self._free < n:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._free -= n
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self._free += n
            self._cond.notify_all()


def _gone(sock: socket.socket) -> bool:
    """True when the client closed ``sock`` (readable with nothing left: EOF), read without
    consuming anything, on the raw socket under the TLS layer."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "shmguard-webhook"
    sys_version = ""
    server: _HTTPServer
    #: The uid of the review being answered, once read (error answers carry it).
    uid = ""
    #: True until the connection's first request was read: its deadline runs from the accept.
    first = True
    raw_requestline: bytes

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _deadline(self, state: str, *, restart: bool) -> float:
        hooks = self.server.hooks
        deadlines = hooks.limits.deadlines
        old = deadlines.get(self.connection)
        if restart or old is None:
            old = time.monotonic() + hooks.options.request_timeout
        deadlines.set(self.connection, old, state)
        return old

    def handle_one_request(self) -> None:
        self.uid = ""
        if not self.first and not self._next_request():
            self.close_connection = True
            return
        self._deadline(IDLE, restart=not self.first)
        self.first = False
        super().handle_one_request()

    def _next_request(self) -> bool:
        """Wait up to the idle timeout for the next request on a kept-alive connection (its
        deadline starts when its first byte arrives); False: none came, or the connection
        was cut."""
        hooks = self.server.hooks
        sock = self.connection
        idle = hooks.options.idle_timeout
        hooks.limits.deadlines.set(sock, time.monotonic() + idle, IDLE)
        if (isinstance(sock, ssl.SSLSocket) and sock.pending()) or self._buffered():
            return True
        try:
            readable, _, _ = select.select([sock], [], [], idle)
        except (OSError, ValueError):
            return False
        return bool(readable) and hooks.limits.deadlines.alive(sock)

    def _buffered(self) -> bool:
        """True when bytes of the next request are in ``rfile``'s buffer already (a client
        that pipelines sent it with the last one), which select cannot see; read without
        waiting."""
        sock = self.connection
        old = sock.gettimeout()
        try:
            sock.settimeout(0)
            return bool(self.rfile.peek(1))  # type: ignore[attr-defined]
        except (OSError, ValueError):  # SSLWantReadError: nothing buffered or waiting
            return False
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(old)

    def parse_request(self) -> bool:
        self._deadline(READING, restart=False)
        return parse_request_within(self, super().parse_request, self.server.hooks.limits.deadlines)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's errors (400, 414, 431, 501, 505) as AdmissionReview answers."""
        text = message or self.responses.get(code, ("error",))[0]
        self.close_connection = True
        self._json(code, admission_error(f"{code} {text}", code, self.uid))

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        if not self.server.hooks.ready:
            self.close_connection = True  # shutting down: no next request on this one
        reason = self.responses.get(code, ("",))[0]
        head = (
            f"HTTP/1.1 {code} {reason}\r\nServer: {self.version_string()}\r\n"
            f"Date: {self.date_time_string()}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if self.close_connection else "")
            + "\r\n"
        )
        self.log_request(code, len(body))
        # one write for headers and body (http.server's send_response makes two): two would
        # be two TLS records and, with Nagle's algorithm and the client's delayed ACK, up to
        # 40 ms more; the status line is sent even before a request line was parsed
        self.wfile.write(head.encode("latin-1") + body)

    def _json(self, code: int, obj: object) -> None:
        self._send(code, json_line(obj).encode())  # the log's encoder: one JSON style

    def _error(self, code: int, reason: str, message: str) -> None:
        """An AdmissionReview error answer; the connection is closed after it."""
        self.close_connection = True
        log_json(logging.WARNING, action="error", reason=reason, message=message)
        self._json(code, admission_error(message, code, self.uid))

    def _drain(self, most: int, seconds: float = 1.0) -> None:
        """Read and drop up to ``most`` bytes of a refused body for up to ``seconds``: closing
        a socket with unread data makes the kernel send a reset, which can destroy the
        response before the client reads it (a lingering close, as HTTP servers do)."""
        end = time.monotonic() + seconds
        with contextlib.suppress(OSError, ValueError):
            while most > 0 and (left := end - time.monotonic()) > 0:
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(most, 65536))
                if not chunk:
                    break
                most -= len(chunk)

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        elif path == "/readyz":
            ready = self.server.hooks.ready
            self._send(
                200 if ready else 503, b"ok\n" if ready else b"shutting down\n", "text/plain"
            )
        elif path == "/mutate":
            self._error(405, "bad-method", "GET /mutate: AdmissionReviews are POSTed")
        else:
            self._send(404, b"not found\n", "text/plain")

    def _length(self) -> int | None:
        """The body's length, or None after answering a missing or malformed one."""
        opts = self.server.hooks.options
        values = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding") or not values:
            self._error(411, "no-length", "a Content-Length is required")
            return None
        raw = values[0].strip().encode("latin-1", "replace")
        if len(set(values)) > 1 or not _LENGTH.fullmatch(raw):
            shown = ", ".join(values)[:40]
            self._error(400, "bad-length", f"Content-Length {shown!r} is not a number of bytes")
            return None
        if len(raw) > LENGTH_DIGITS or int(raw) > opts.max_body:
            shown = raw.decode() if len(raw) <= 40 else f"a {len(raw)}-digit number of"
            msg = f"request body of {shown} bytes is over the {opts.max_body}-byte limit"
            self._error(413, "too-large", msg)
            self._drain(opts.max_body if len(raw) > LENGTH_DIGITS else int(raw))
            return None
        return int(raw)

    def do_POST(self) -> None:
        if self.path.partition("?")[0] != "/mutate":
            self._send(404, b"not found\n", "text/plain")
            return
        length = self._length()
        if length is None:
            return
        hooks = self.server.hooks
        deadline = self._deadline(READING, restart=False)
        reserve = min(DECIDE_RESERVE, 0.4 * hooks.options.request_timeout)
        # busy while it waits: a cut socket would not wake it, so its slot is not taken
        self._deadline(BUSY, restart=False)
        if not hooks.budget.reserve(length, deadline - reserve):
            msg = f"busy: {hooks.budget.total} bytes of request bodies already in flight"
            self._error(503, "busy", msg)
            self._drain(length, 0.2)
            return
        try:
            self._deadline(READING, restart=False)
            body = self.rfile.read(length)
            if len(body) < length:
                self.close_connection = True
                return
            self._deadline(BUSY, restart=False)
            if time.monotonic() >= deadline or _gone(self.connection):
                # the API server stopped waiting: a decision now would be for nobody
                self.close_connection = True
                hooks.abandoned += 1
                return
            code, answer = hooks.review(body, self)
            del body
        finally:
            hooks.budget.release(length)
        self._json(code, answer)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    hooks: WebhookServer

    def process_request(self, request: Any, client_address: Any) -> None:
        limits = self.hooks.limits
        if not limits.admit():
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            limits.release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        hooks = self.hooks
        deadlines = hooks.limits.deadlines
        sock = request
        try:
            deadline = time.monotonic() + hooks.options.request_timeout
            request.settimeout(hooks.options.request_timeout)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # wrap_socket detaches ``request``: only the wrapped socket can be cut, so it is
            # tracked before the handshake, whose deadline is the first request's
            sock = hooks.certs.context().wrap_socket(
                request, server_side=True, do_handshake_on_connect=False
            )
            deadlines.set(sock, deadline, IDLE)
            sock.do_handshake()
            self.finish_request(sock, client_address)
        except (OSError, ValueError):
            pass  # a handshake that failed or timed out, a client gone, a socket reaped
        except Exception as err:  # a bug: one line, the traceback at DEBUG
            log_json(logging.ERROR, action="error", reason="connection", message=_brief(err))
            log.debug("webhook connection failed", exc_info=True)
        finally:
            self.shutdown_request(sock)
            hooks.limits.release(sock)


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class WebhookServer:
    """The webhook's HTTPS server, bound and ready to :meth:`serve_forever`.

    Raises:
        OSError: the address cannot be bound.
        shmguard.fleet.tls.CertError: the certificate or key cannot be loaded.
    """

    def __init__(self, options: WebhookServerOptions) -> None:
        self.options = options
        self.certs = CertReloader(options.cert, options.key)
        self.budget = _Budget(options.body_budget)
        self.ready = True
        #: Requests read whole but not decided: the client was gone or the deadline passed.
        self.abandoned = 0
        self._serving = threading.Event()
        kind = _HTTPServer6 if ":" in options.host else _HTTPServer
        self._http = kind((options.host, options.port), _Handler, bind_and_activate=False)
        self._http.hooks = self
        try:
            self._http.server_bind()
            self._http.server_activate()
        except OSError:
            self._http.server_close()
            raise
        self.host: str = options.host
        self.port: int = self._http.server_address[1]
        self.limits = ConnectionLimits(options.max_connections, "webhook-reaper")

    @property
    def refused(self) -> int:
        """Connections closed at once because every slot was answering a request."""
        return self.limits.refused

    def review(self, body: bytes, handler: _Handler | None = None) -> tuple[int, dict[str, Any]]:
        """HTTP status and AdmissionReview for one request body; the decision is logged.
        Errors carry the request's uid when it could be read (also set on ``handler``)."""
        start = time.perf_counter()
        uid = ""
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError) as err:  # JSONDecodeError, nesting too deep
            return self._refused(400, "bad-request", f"not JSON: {_brief(err, typed=False)}", uid)
        request = parsed.get("request") if isinstance(parsed, dict) else None
        if isinstance(request, dict) and isinstance(request.get("uid"), str):
            uid = request["uid"][:256]
            if handler is not None:
                handler.uid = uid
        try:
            decision = decide_admission(parsed, self.options.webhook)
        except ReviewError as err:  # PodTooLarge too
            return self._refused(err.code, err.reason, str(err), uid)
        except Exception as err:  # a bug: answered (failurePolicy applies), one log line
            log_json(logging.ERROR, action="error", reason="internal", uid=uid, message=_brief(err))
            log.debug("webhook decision failed (uid %s)", uid, exc_info=True)
            return 500, admission_error("internal error", 500, uid)
        ms = round((time.perf_counter() - start) * 1000, 3)
        log.info(json_line({**decision.record, "ms": ms}))
        return 200, admission_response(decision)

    @staticmethod
    def _refused(code: int, reason: str, msg: str, uid: str) -> tuple[int, dict[str, Any]]:
        log_json(logging.WARNING, action="error", reason=reason, uid=uid, message=msg)
        return code, admission_error(msg, code, uid)

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread)."""
        self._serving.set()
        self._http.serve_forever(poll_interval=0.2)

    def start(self) -> threading.Thread:
        """Serve in a new thread (returned, started)."""
        t = threading.Thread(target=self.serve_forever, name="webhook-server", daemon=True)
        self._serving.set()
        t.start()
        return t

    def shutdown(self, grace: float = 5.0) -> None:
        """Stop accepting, report not ready, let requests in progress finish for up to
        ``grace`` seconds, then close every connection and the socket."""
        self.ready = False
        if self._serving.is_set():
            self._http.shutdown()
        deadlines = self.limits.deadlines
        self.limits.idle_too = True
        deadlines.reap(time.monotonic(), idle_too=True)
        end = time.monotonic() + grace
        while deadlines.in_progress() and time.monotonic() < end:
            time.sleep(0.05)
        deadlines.reap(time.monotonic(), everything=True)
        self.limits.close()
        self._http.server_close()

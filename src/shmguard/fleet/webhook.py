"""The admission webhook's HTTPS server: ``POST /mutate``, ``GET /healthz``, ``GET /readyz``.

Standard library only (:mod:`http.server`, :mod:`ssl`). Each connection gets a thread from a
bounded pool of :attr:`WebhookServerOptions.max_connections`; one more is closed at once (the API
server then applies the webhook's ``failurePolicy: Ignore``). The TLS handshake runs in the
connection's thread, never in the accept loop, so a client that stalls it delays only itself.
Every request, the wait for it on a kept-alive connection included, must finish within
:attr:`WebhookServerOptions.request_timeout`: a reaper thread shuts down the socket of any that does
not (a slowloris holds a thread for at most that long). Bodies over
:attr:`WebhookServerOptions.max_body` get 413 without being parsed; a body that is not an
AdmissionReview gets 400 with an AdmissionReview whose ``status`` says why. Each decision is
logged as one JSON line on the ``shmguard.webhook`` logger (nothing is printed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
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
from shmguard.fleet.tls import CertReloader
from shmguard.units import MiB

log = logging.getLogger("shmguard.webhook")


@dataclass(frozen=True)
class WebhookServerOptions:
    """The server's address, files and limits.

    Attributes:
        host, port: where to listen (port 0 picks a free one).
        cert, key: the PEM certificate chain and key, reloaded when they change.
        max_body: largest request body in bytes (the API server's objects are at most
            1.5 MiB in etcd by default; a review holds the object and, for updates, the old one).
        max_connections: connections served at once; more are closed on accept.
        request_timeout: seconds a request may take from the wait for its first byte to the
            end of the response (the API server gives the webhook ``timeoutSeconds``).
        webhook: what the webhook decides (audit mode, excluded namespaces, sizing policy).
    """

    cert: Path
    key: Path
    host: str = "0.0.0.0"
    port: int = 8443
    max_body: int = 4 * MiB
    max_connections: int = 128
    request_timeout: float = 10.0
    webhook: WebhookOptions = field(default_factory=WebhookOptions)


class _Deadlines:
    """Open connections and the time each must be done by; :meth:`reap` shuts down the late."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, tuple[float, bool]] = {}

    def set(self, sock: socket.socket, deadline: float, busy: bool) -> None:
        with self._lock:
            self._conns[sock] = (deadline, busy)

    def drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.pop(sock, None)

    def busy(self) -> int:
        with self._lock:
            return sum(1 for _, b in self._conns.values() if b)

    def reap(self, now: float, *, idle_too: bool = False, everything: bool = False) -> int:
        with self._lock:
            late = [
                s
                for s, (d, b) in self._conns.items()
                if everything or d <= now or (idle_too and not b)
            ]
        for s in late:
            # the base class's shutdown: an SSLSocket's own would drop its TLS state
            with contextlib.suppress(OSError):
                socket.socket.shutdown(s, socket.SHUT_RDWR)
        return len(late)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "shmguard-webhook"
    sys_version = ""
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def handle_one_request(self) -> None:
        hooks = self.server.hooks
        hooks.deadlines.set(
            self.connection, time.monotonic() + hooks.options.request_timeout, False
        )
        super().handle_one_request()

    def parse_request(self) -> bool:
        hooks = self.server.hooks
        hooks.deadlines.set(self.connection, time.monotonic() + hooks.options.request_timeout, True)
        return super().parse_request()

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection or not self.server.hooks.ready:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: object) -> None:
        self._send(code, json.dumps(obj, separators=(",", ":")).encode())

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
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        if self.path.partition("?")[0] != "/mutate":
            self._send(404, b"not found\n", "text/plain")
            return
        opts = self.server.hooks.options
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None or not length.isdigit():
            self.close_connection = True
            self._json(411, admission_error("a Content-Length is required", 411))
            return
        if int(length) > opts.max_body:
            self.close_connection = True  # the body is not read
            msg = f"request body of {length} bytes is over the {opts.max_body}-byte limit"
            self._json(413, admission_error(msg, 413))
            log.warning(json.dumps({"action": "error", "reason": "too-large", "message": msg}))
            self._drain(min(int(length), opts.max_body))
            return
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            self.close_connection = True
            return
        self._json(*self.server.hooks.review(body))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    hooks: WebhookServer

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.hooks.slots.acquire(blocking=False):
            self.hooks.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.hooks.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        hooks = self.hooks
        sock = request
        try:
            request.settimeout(hooks.options.request_timeout)
            hooks.deadlines.set(request, time.monotonic() + hooks.options.request_timeout, False)
            sock = hooks.certs.context().wrap_socket(request, server_side=True)
            hooks.deadlines.drop(request)
            self.finish_request(sock, client_address)
        except (OSError, ValueError):
            pass  # a handshake that failed or timed out, a client gone, a socket reaped
        except Exception:
            log.exception("webhook connection failed")
        finally:
            hooks.deadlines.drop(request)
            hooks.deadlines.drop(sock)
            self.shutdown_request(sock)
            hooks.slots.release()


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
        self.deadlines = _Deadlines()
        self.slots = threading.BoundedSemaphore(options.max_connections)
        #: Connections closed at once because every slot was taken.
        self.refused = 0
        self.ready = True
        self._stop = threading.Event()
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
        self._reaper = threading.Thread(target=self._reap, name="webhook-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        while not self._stop.wait(0.2):
            self.deadlines.reap(time.monotonic(), idle_too=not self.ready)

    def review(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """HTTP status and AdmissionReview for one request body; the decision is logged."""
        start = time.perf_counter()
        try:
            decision = decide_admission(json.loads(body), self.options.webhook)
        except (ValueError, RecursionError) as err:  # JSONDecodeError and ReviewError too
            msg = str(err) if isinstance(err, ReviewError) else f"not JSON: {err}"
            log.warning(json.dumps({"action": "error", "reason": "bad-request", "message": msg}))
            return 400, admission_error(msg, 400)
        except Exception:
            log.exception("webhook decision failed")
            return 500, admission_error("internal error", 500)
        ms = round((time.perf_counter() - start) * 1000, 3)
        log.info(json.dumps({**decision.record, "ms": ms}, separators=(",", ":")))
        return 200, admission_response(decision)

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
        self.deadlines.reap(time.monotonic(), idle_too=True)
        end = time.monotonic() + grace
        while self.deadlines.busy() and time.monotonic() < end:
            time.sleep(0.05)
        self.deadlines.reap(time.monotonic(), everything=True)
        self._stop.set()
        self._http.server_close()

"""The exporter's HTTP server under idle and half-sent connections (issue 24, item 5): a
bounded number of threads, connections cut at the request timeout, a scrape that still gets
through, and an HTTP/0.9 request line answered instead of hanging. Loopback only, on a
server the test starts."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shmguard.monitor.exporter import (
    MAX_CONNECTIONS,
    TIMEOUT,
    ExporterOptions,
    ExporterServer,
    ShmCollector,
)


@pytest.fixture
def exporter() -> Iterator[ExporterServer]:
    collector = ShmCollector(ExporterOptions(labels={}))
    collector.start()
    server = ExporterServer(collector, "127.0.0.1", 0, max_connections=8, timeout=1.0)
    yield server
    server.shutdown()


def settles(condition: Callable[[], bool], within: float = 3.0) -> bool:
    """True once ``condition`` holds, polled for up to ``within`` seconds (cut connections'
    threads end within milliseconds, not at once)."""
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def scrape(server: ExporterServer) -> bytes:
    url = f"http://127.0.0.1:{server.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        return bytes(r.read())


def test_the_defaults_are_64_connections_and_10_seconds() -> None:
    assert (MAX_CONNECTIONS, TIMEOUT) == (64, 10.0)


def test_half_sent_requests_hold_bounded_threads_and_are_cut(exporter: ExporterServer) -> None:
    before = threading.active_count()
    socks = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", exporter.port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
        socks.append(s)
    assert settles(lambda: threading.active_count() <= before + 8 + 1)
    start = time.monotonic()
    assert b"shmguard_up 1.0" in scrape(exporter)  # takes the slot of a half-sent one
    assert time.monotonic() - start < 5.0
    assert exporter.limits.evicted >= 1
    # every one of them is closed by the server within its timeout (or was evicted)
    end = time.monotonic() + 5
    for s in socks:
        s.settimeout(max(0.01, end - time.monotonic()))
        with contextlib.suppress(ConnectionError):
            assert s.recv(100) == b""
        s.close()
    assert settles(lambda: threading.active_count() <= before + 1)


def test_an_idle_connection_is_closed_at_the_timeout(exporter: ExporterServer) -> None:
    s = socket.create_connection(("127.0.0.1", exporter.port), timeout=5)
    start = time.monotonic()
    assert s.recv(100) == b""
    assert 0.5 < time.monotonic() - start < 3.0
    s.close()


def test_an_http_0_9_request_line_is_answered_at_once(exporter: ExporterServer) -> None:
    s = socket.create_connection(("127.0.0.1", exporter.port), timeout=5)
    s.settimeout(0.8)  # under the server's own 1 s timeout: the answer, not the cut
    s.sendall(b"GET /metrics\r\n")
    assert s.recv(100).startswith(b"HTTP/1.0 400")
    s.close()
    assert b"shmguard_info" in scrape(exporter)


class GateCollector:
    """A collector whose collection waits until the test opens its gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.collections = 0

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        self.collections += 1
        self.gate.wait(10)
        yield GaugeMetricFamily("gate_collections", "collections run", self.collections)

    def close(self) -> None:
        self.gate.set()


def test_scrapes_at_once_share_one_collection() -> None:
    collector = GateCollector()
    server = ExporterServer(collector, "127.0.0.1", 0, max_connections=8, timeout=5.0)
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(scrape(server))) for _ in range(5)]
    try:
        for t in threads:
            t.start()
        # one scrape collects (held at the gate), the four others join it
        assert settles(lambda: server.shared.joined == 4, within=10.0)
        collector.gate.set()
        for t in threads:
            t.join(timeout=10)
        assert collector.collections == 1 and len(bodies) == 5
        assert all(b"gate_collections 1.0" in b for b in bodies)
        # a scrape after that gets a collection of its own
        assert b"gate_collections 2.0" in scrape(server)
    finally:
        server.shutdown()

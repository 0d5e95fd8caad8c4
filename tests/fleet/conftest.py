"""Fixtures for the webhook tests: a throwaway CA and a running webhook on loopback TLS."""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from webhook_helpers import Pki, client_context, make_pki

from shmguard.fleet.webhook import WebhookServer, WebhookServerOptions


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """A CA in ``tmp_path`` and a server certificate ``server.crt``/``server.key``."""
    p = make_pki(tmp_path)
    p.issue("server")
    return p


@pytest.fixture
def serve(pki: Pki) -> Iterator[Callable[..., WebhookServer]]:
    """Start a webhook on 127.0.0.1 (any free port) with ``server.crt``; keyword arguments
    go to :class:`WebhookServerOptions`. Every server is shut down at the end."""
    servers: list[WebhookServer] = []

    def start(**kw: Any) -> WebhookServer:
        opts = WebhookServerOptions(
            pki.dir / "server.crt", pki.dir / "server.key", "127.0.0.1", 0, **kw
        )
        s = WebhookServer(opts)
        s.start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.shutdown(grace=1.0)


@pytest.fixture
def connect(pki: Pki) -> Iterator[Callable[[WebhookServer], http.client.HTTPSConnection]]:
    """Open an HTTPS connection to a server, trusting only the test CA; closed at the end."""
    conns: list[http.client.HTTPSConnection] = []

    def open_(server: WebhookServer) -> http.client.HTTPSConnection:
        c = http.client.HTTPSConnection(
            "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=10
        )
        conns.append(c)
        return c

    yield open_
    for c in conns:
        c.close()

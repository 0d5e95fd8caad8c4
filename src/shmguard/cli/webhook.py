"""``shmguard webhook``: the mutating admission webhook, until SIGTERM or SIGINT.

Thin: parse arguments, start :class:`shmguard.fleet.webhook.WebhookServer`, log its decisions
as JSON lines on stderr, wait for a signal, shut it down gracefully. Exit status: 0 after a
signal, 2 for bad input, an unreadable certificate or an address that cannot be bound.
"""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._app import app
from shmguard.cli._common import fail, size_option, stop_on_signal
from shmguard.cli._config import ConfigOption, settings
from shmguard.cli._runopts import _duration
from shmguard.cli.exporter import parse_listen


@app.command()
def webhook(
    tls_cert: Annotated[
        Path,
        typer.Option(
            "--tls-cert",
            metavar="FILE",
            help="PEM certificate chain; reloaded when the file changes.",
        ),
    ],
    tls_key: Annotated[
        Path,
        typer.Option(
            "--tls-key", metavar="FILE", help="PEM private key; reloaded when the file changes."
        ),
    ],
    listen: str = typer.Option(
        ":8443", "--listen", metavar="HOST:PORT", help="Address to serve HTTPS on (all: :8443)."
    ),
    audit: bool = typer.Option(
        False, "--audit", help="Patch nothing: warn and log what would be done."
    ),
    exclude_namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude-namespace",
            metavar="NS",
            help="Never patch pods of this namespace (repeatable; added to kube-system, "
            "kube-public and kube-node-lease).",
        ),
    ] = None,
    max_body: str = typer.Option(
        "4Mi", "--max-body", metavar="SIZE", help="Largest request body; larger ones get 413."
    ),
    body_budget: str = typer.Option(
        "8Mi",
        "--body-budget",
        metavar="SIZE",
        help="Request bodies read or decided at once, over all connections (at least "
        "--max-body); a request that finds no room in time gets 503.",
    ),
    max_connections: int = typer.Option(
        128,
        "--max-connections",
        metavar="N",
        help="Connections served at once; when all are taken, a new one takes the slot of "
        "the oldest that is idle or still sending its request.",
        min=1,
    ),
    timeout_seconds: int = typer.Option(
        3,
        "--timeout-seconds",
        metavar="N",
        help="The webhook configuration's timeoutSeconds (1-30): how long the API server "
        "waits before it applies failurePolicy. Each request's deadline is derived from it.",
        min=1,
        max=30,
    ),
    request_timeout: str | None = typer.Option(
        None,
        "--request-timeout",
        metavar="DURATION",
        help="Longest a request may take, the TLS handshake and the wait for it included; "
        "slower ones are cut. Default 2.5s: --timeout-seconds (3) minus 0.5s; must be below "
        "--timeout-seconds.",
    ),
    idle_timeout: str = typer.Option(
        "30s",
        "--idle-timeout",
        metavar="DURATION",
        help="Longest a kept-alive connection may wait for its next request.",
    ),
    config: ConfigOption = None,
) -> None:
    """Mutating admission webhook: give PyTorch pods a sized memory-backed /dev/shm.

    Serves POST /mutate (AdmissionReview v1, JSONPatch of add operations), GET /healthz and
    /readyz over HTTPS. Logs every decision as a JSON line on stderr. Runs until SIGTERM or
    SIGINT. Manifests in deploy/webhook; see docs/webhook.md.
    """
    from shmguard.fleet.admission import DEFAULT_EXCLUDED, WebhookOptions
    from shmguard.fleet.logline import log_json
    from shmguard.fleet.tls import CertError
    from shmguard.fleet.webhook import WebhookServer, WebhookServerOptions, request_deadline

    host, port = parse_listen(listen)
    body = size_option(max_body, "--max-body")
    budget = size_option(body_budget, "--body-budget")
    assert body is not None and budget is not None
    if budget < body:
        fail(f"--body-budget {body_budget}: must be at least --max-body ({max_body})")
    timeout = _duration(request_timeout, "--request-timeout") or request_deadline(timeout_seconds)
    if not 0.1 <= timeout < timeout_seconds:
        fail(
            f"--request-timeout {request_timeout}: must be from 100ms to below --timeout-seconds "
            f"({timeout_seconds}s): the API server stops waiting then"
        )
    idle = _duration(idle_timeout, "--idle-timeout") or 30.0
    if not 0.1 <= idle <= 3600:
        fail(f"--idle-timeout {idle_timeout}: must be from 100ms to 1h")
    exclude_namespace = exclude_namespace or []
    for ns in exclude_namespace:
        if not ns or len(ns) > 63:
            fail(f"--exclude-namespace {ns!r}: not a namespace name")
    options = WebhookServerOptions(
        cert=tls_cert,
        key=tls_key,
        host=host,
        port=port,
        max_body=body,
        body_budget=budget,
        max_connections=max_connections,
        request_timeout=timeout,
        idle_timeout=idle,
        webhook=WebhookOptions(
            audit=audit,
            excluded_namespaces=frozenset((*DEFAULT_EXCLUDED, *exclude_namespace)),
            policy=settings(config).policy,
        ),
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("shmguard.webhook")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # one line per decision, whatever the root logger has
    try:
        server = WebhookServer(options)
    except CertError as err:
        fail(f"--tls-cert/--tls-key: {err}")
    except OSError as err:
        fail(f"--listen {listen}: {err.strerror or err}")
    # everything imported so far lives as long as the process: keep it out of the cyclic
    # collector's full passes, whose pauses would land on requests (gc.freeze, Python 3.7+)
    gc.collect()
    gc.freeze()
    stop = stop_on_signal()
    thread = server.start()
    shown = f"[{server.host}]" if ":" in server.host else server.host
    log_json(
        logging.INFO,
        action="start",
        url=f"https://{shown}:{server.port}/mutate",
        audit=audit,
        request_timeout=timeout,
        timeout_seconds=timeout_seconds,
    )
    while not stop.wait(0.5):
        pass
    log_json(logging.INFO, action="stop", message="shutting down")
    server.shutdown()
    thread.join(timeout=5)

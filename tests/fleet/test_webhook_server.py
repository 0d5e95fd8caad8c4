"""The webhook's HTTPS server on loopback with real TLS: answers, errors, limits, slow clients,
certificate reload, health endpoints and graceful shutdown; and the ``shmguard webhook``
command in a subprocess."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from webhook_helpers import Pki, client_context, post, review, start_webhook

from shmguard.fleet.tls import CertError, CertReloader
from shmguard.fleet.webhook import WebhookServer
from shmguard.units import MiB

Serve = Callable[..., WebhookServer]
Connect = Callable[[WebhookServer], http.client.HTTPSConnection]
TRAIN = {"name": "train", "image": "pytorch/pytorch:2.3.0"}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [TRAIN]},
}


def ok(server: WebhookServer, pki: Pki) -> bool:
    """One fresh connection gets a decision."""
    c = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=5
    )
    try:
        status, body = post(c, json.dumps(review(POD)).encode())
    finally:
        c.close()
    return status == 200 and isinstance(body, dict) and body["response"]["allowed"] is True


def tls_socket(server: WebhookServer, pki: Pki) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return client_context(pki.ca_file).wrap_socket(raw, server_hostname="127.0.0.1")


def closed_by_peer(s: socket.socket, within: float) -> bool:
    """True when the peer closes ``s`` within ``within`` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def test_malformed_and_wrong_bodies_get_clean_admission_review_errors(
    serve: Serve, connect: Connect, pki: Pki
) -> None:
    server = serve()
    c = connect(server)
    for body, words in [
        (b"{not json", "not JSON"),
        (b"[" * 100_000, "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "expected apiVersion"),
        (json.dumps({**review(POD), "request": {"uid": ""}}).encode(), "no request with a uid"),
        ("\udcff".encode("utf-8", "surrogatepass"), "not JSON"),
    ]:
        status, resp = post(c, body)
        assert status == 400 and isinstance(resp, dict)
        assert resp["kind"] == "AdmissionReview" and resp["apiVersion"] == "admission.k8s.io/v1"
        assert resp["response"]["allowed"] is False
        assert resp["response"]["status"]["code"] == 400
        assert words in resp["response"]["status"]["message"]
    assert ok(server, pki)
    c.request("GET", "/nothing")
    r = c.getresponse()
    assert (r.status, r.read()) == (404, b"not found\n")


def test_oversized_body_gets_413_unread_and_the_server_goes_on(
    serve: Serve, connect: Connect, pki: Pki
) -> None:
    server = serve(max_body=64 * 1024)
    c = connect(server)
    status, resp = post(c, b"x" * (64 * 1024 + 1))
    assert status == 413 and isinstance(resp, dict)
    assert resp["response"]["status"]["code"] == 413
    assert "over the 65536-byte limit" in resp["response"]["status"]["message"]
    # a client that claims a huge body and sends none is answered without a read
    s = tls_socket(server, pki)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n")
    head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413")
    s.close()
    # no Content-Length (chunked) is refused
    s = tls_socket(server, pki)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 411")
    s.close()
    assert ok(server, pki)


def test_slowloris_connections_are_cut_and_give_up_their_slots(serve: Serve, pki: Pki) -> None:
    server = serve(max_connections=4, request_timeout=1.0)
    slow = []
    for _ in range(3):  # headers one byte at a time, never finished
        s = tls_socket(server, pki)
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n")
        slow.append(s)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)  # no TLS handshake
    # every slot is taken by a client still sending its request: a new one takes one of them
    assert ok(server, pki)
    assert server.limits.evicted >= 1 and server.refused == 0
    start = time.monotonic()
    for s in slow:
        with contextlib.suppress(OSError):
            s.sendall(b"X")  # a byte now and then does not extend the deadline
    assert all(closed_by_peer(s, 3.0) for s in slow)
    assert closed_by_peer(raw, 3.0)
    assert time.monotonic() - start < 3.0
    assert ok(server, pki)
    for s in (*slow, raw):
        s.close()


def test_a_slow_body_is_cut_at_the_deadline(serve: Serve, pki: Pki) -> None:
    server = serve(request_timeout=1.0)
    s = tls_socket(server, pki)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    t = time.monotonic()
    assert closed_by_peer(s, 3.0)
    assert time.monotonic() - t < 2.5
    s.close()
    assert ok(server, pki)


def _serial(server: WebhookServer, pki: Pki) -> int:
    s = tls_socket(server, pki)
    der = s.getpeercert(binary_form=True)
    s.close()
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_certificates_reload_when_the_files_change(serve: Serve, pki: Pki) -> None:
    server = serve()
    c = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=5
    )
    assert post(c, json.dumps(review(POD)).encode())[0] == 200
    first = _serial(server, pki)
    crt, key = pki.issue("next")
    new = x509.load_pem_x509_certificate(crt.read_bytes()).serial_number
    # as the kubelet updates a Secret volume: new files renamed over the old paths
    os.replace(key, pki.dir / "server.key")
    os.replace(crt, pki.dir / "server.crt")
    assert _serial(server, pki) == new != first
    assert server.certs.reloads == 1
    # the connection opened before goes on with the old certificate
    assert post(c, json.dumps(review(POD)).encode())[0] == 200
    c.close()
    # a key that does not match the certificate keeps the last good pair
    _, other_key = pki.issue("other")
    os.replace(other_key, pki.dir / "server.key")
    assert _serial(server, pki) == new
    assert ok(server, pki)


def test_cert_reloader_errors_name_the_file(tmp_path: Path, pki: Pki) -> None:
    with pytest.raises(CertError, match=r"missing\.crt: no such file"):
        CertReloader(tmp_path / "missing.crt", pki.dir / "server.key")
    bad = tmp_path / "bad.crt"
    bad.write_text("not a certificate\n")
    with pytest.raises(CertError, match=r"bad\.crt"):
        CertReloader(bad, pki.dir / "server.key")


def test_health_and_graceful_shutdown(serve: Serve, connect: Connect, pki: Pki) -> None:
    server = serve()
    c = connect(server)
    for path in ("/healthz", "/readyz"):
        c.request("GET", path)
        r = c.getresponse()
        assert (r.status, r.read()) == (200, b"ok\n")
    idle = tls_socket(server, pki)  # kept-alive and idle: closed at once by shutdown
    start = time.monotonic()
    server.shutdown(grace=2.0)
    assert time.monotonic() - start < 1.5
    assert closed_by_peer(idle, 1.0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
    idle.close()


def test_keep_alive_serves_many_requests_on_one_connection(serve: Serve, connect: Connect) -> None:
    server = serve()
    c = connect(server)
    uids = set()
    for _ in range(50):
        r = review(POD)
        status, body = post(c, json.dumps(r).encode())
        assert status == 200 and isinstance(body, dict)
        uids.add(body["response"]["uid"])
        assert body["response"]["uid"] == r["request"]["uid"]
    assert len(uids) == 50


def _start_cli(pki: Pki, *extra: str) -> tuple[subprocess.Popen[str], int]:
    return start_webhook(pki.dir / "server.crt", pki.dir / "server.key", *extra)


def test_cli_serves_logs_json_decisions_and_stops_on_sigterm(pki: Pki) -> None:
    proc, port = _start_cli(pki, "--audit", "--exclude-namespace", "batch")
    assert proc.stderr is not None
    try:
        c = http.client.HTTPSConnection(
            "127.0.0.1", port, context=client_context(pki.ca_file), timeout=5
        )
        status, body = post(c, json.dumps(review(POD)).encode())
        assert status == 200 and isinstance(body, dict)
        assert "patch" not in body["response"]
        status, body = post(c, json.dumps(review(POD, namespace="batch")).encode())
        assert status == 200
        c.close()
        first = json.loads(proc.stderr.readline())
        assert first["action"] == "audit" and first["shm_bytes"] == 1024 * MiB
        second = json.loads(proc.stderr.readline())
        assert (second["action"], second["reason"]) == ("skip", "excluded-namespace")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    rest = [json.loads(line) for line in proc.stderr.read().splitlines()]
    assert rest[-1] == {"action": "stop", "message": "shutting down"}


def _compact(data: object) -> bool:
    """Whether the JSON text ``data`` is written without spaces after its separators."""
    return json.dumps(json.loads(data), separators=(",", ":")) == data  # type: ignore[arg-type]


def test_responses_patches_and_logs_are_one_compact_json_style(pki: Pki) -> None:
    # The body and the log lines were compact, the JSONPatch inside the body spaced.
    proc, port = _start_cli(pki)
    assert proc.stderr is not None
    try:
        c = http.client.HTTPSConnection(
            "127.0.0.1", port, context=client_context(pki.ca_file), timeout=5
        )
        c.request("POST", "/mutate", body=json.dumps(review(POD)).encode())
        raw = c.getresponse().read().decode()
        c.request("POST", "/mutate", body=b'{"kind": "nothing"}')
        error = c.getresponse().read().decode()
        c.close()
        logs = [proc.stderr.readline().rstrip("\n") for _ in range(2)]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    patch = base64.b64decode(json.loads(raw)["response"]["patch"]).decode()
    assert patch.startswith('[{"op":"add","path":"/spec/volumes","value":[{"name":"dshm"')
    for text in (raw, patch, error, *logs):
        assert _compact(text), text


def test_cli_bad_certificate_is_a_one_line_error(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "shmguard",
            "webhook",
            "--tls-cert",
            str(tmp_path / "c"),
            "--tls-key",
            str(tmp_path / "k"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert r.stderr == f"shmguard: error: --tls-cert/--tls-key: {tmp_path / 'c'}: no such file\n"


def test_ipv6_listen(pki: Pki) -> None:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    from shmguard.fleet.webhook import WebhookServerOptions

    server = WebhookServer(
        WebhookServerOptions(pki.dir / "server.crt", pki.dir / "server.key", "::1", 0)
    )
    server.start()
    try:
        ctx = client_context(pki.ca_file)
        ctx.check_hostname = False  # the test certificate names 127.0.0.1 and localhost
        c = http.client.HTTPSConnection("::1", server.port, context=ctx, timeout=5)
        status, _ = post(c, json.dumps(review(POD)).encode())
        c.close()
        assert status == 200
    finally:
        server.shutdown(grace=1.0)

"""The webhook server under hostile clients (issue 24, item 4), on loopback with real TLS and
servers the tests start: the deadline below the configuration's ``timeoutSeconds``, slow
clients that cannot starve a fresh review, strict ``Content-Length``, the body budget, work
stopped for abandoned requests, every error an AdmissionReview with its uid, one write per
answer, and a clear error for swapped certificate and key files."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_webhook_server import POD, TRAIN, Serve, closed_by_peer, ok, tls_socket
from webhook_helpers import Pki, client_context, post, review

from shmguard.fleet.webhook import (
    CONFIG_TIMEOUT_SECONDS,
    DEFAULT_REQUEST_TIMEOUT,
    WebhookServer,
    WebhookServerOptions,
    request_deadline,
)
from shmguard.units import MiB

ROOT = Path(__file__).resolve().parents[2]


def exchange(server: WebhookServer, pki: Pki, data: bytes, within: float = 5.0) -> bytes:
    """Send ``data`` on a fresh TLS connection; everything the server sends back until it
    closes the connection (or ``within`` seconds pass)."""
    s = tls_socket(server, pki)
    s.sendall(data)
    s.settimeout(within)
    out = b""
    end = time.monotonic() + within
    with contextlib.suppress(OSError, ssl.SSLError):
        while time.monotonic() < end and (chunk := s.recv(65536)):
            out += chunk
    s.close()
    return out


def answer(raw: bytes) -> tuple[int, dict[str, Any]]:
    """(status, AdmissionReview) of one raw HTTP response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def test_the_default_deadline_is_below_the_configured_timeout_seconds() -> None:
    docs = yaml.safe_load_all(
        (ROOT / "deploy/webhook/mutatingwebhookconfiguration.yaml").read_text()
    )
    (hook,) = next(d for d in docs if d and d["kind"] == "MutatingWebhookConfiguration")["webhooks"]
    assert hook["timeoutSeconds"] == CONFIG_TIMEOUT_SECONDS
    opts = WebhookServerOptions(Path("c"), Path("k"))
    assert opts.request_timeout == DEFAULT_REQUEST_TIMEOUT == CONFIG_TIMEOUT_SECONDS - 0.5
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "webhook", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")},
    )
    assert "Default 2.5s: --timeout-seconds (3) minus 0.5s" in " ".join(r.stdout.split())
    # the Deployment tells the server the configuration's timeoutSeconds
    dep = yaml.safe_load((ROOT / "deploy/webhook/deployment.yaml").read_text())
    cmd = dep["spec"]["template"]["spec"]["containers"][0]["command"]
    assert int(cmd[cmd.index("--timeout-seconds") + 1]) == hook["timeoutSeconds"]


def _argv(pki: Pki, *extra: str) -> list[str]:
    """``shmguard webhook`` on a free loopback port with the test certificate, and ``extra``."""
    files = ["--tls-cert", str(pki.dir / "server.crt"), "--tls-key", str(pki.dir / "server.key")]
    return [sys.executable, "-m", "shmguard", "webhook", "--listen", "127.0.0.1:0", *files, *extra]


def _cli_error(pki: Pki, *extra: str) -> subprocess.CompletedProcess[str]:
    """``shmguard webhook`` with options it refuses: exit 2 (checked), and its output."""
    r = subprocess.run(_argv(pki, *extra), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    return r


def _start_line(pki: Pki, *extra: str) -> dict[str, Any]:
    """The first log line of ``shmguard webhook`` started with ``extra`` (then stopped)."""
    proc = subprocess.Popen(_argv(pki, *extra), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return json.loads(line)  # type: ignore[no-any-return]


def test_the_deadline_follows_timeout_seconds(pki: Pki) -> None:
    start = _start_line(pki, "--timeout-seconds", "10")
    assert (start["action"], start["timeout_seconds"], start["request_timeout"]) == (
        "start",
        10,
        9.5,
    )
    assert _start_line(pki)["request_timeout"] == DEFAULT_REQUEST_TIMEOUT == 2.5
    assert request_deadline(1) == 0.5
    r = _cli_error(pki, "--request-timeout", "3s")
    assert r.stderr == (
        "shmguard: error: --request-timeout 3s: must be from 100ms to below --timeout-seconds "
        "(3s): the API server stops waiting then\n"
    )


def test_a_stalled_handshake_is_cut_before_the_api_server_gives_up(serve: Serve) -> None:
    server = serve()  # the default deadline
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    start = time.monotonic()
    assert closed_by_peer(raw, 5.0)
    assert time.monotonic() - start < CONFIG_TIMEOUT_SECONDS
    raw.close()


def test_slow_clients_cannot_starve_fresh_reviews(serve: Serve, pki: Pki) -> None:
    server = serve(max_connections=16)
    stop = threading.Event()
    slow: list[socket.socket] = []

    def drip() -> None:  # a byte a second on each slow connection, bounded in time
        end = time.monotonic() + 15
        while not stop.wait(1.0) and time.monotonic() < end:
            for s in slow:
                with contextlib.suppress(OSError):
                    s.send(b"X")

    for i in range(40):
        if i % 4 == 0:  # a TCP connection that never starts TLS
            slow.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            continue
        with contextlib.suppress(OSError, ssl.SSLError):
            s = tls_socket(server, pki)
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        took = []
        for _ in range(10):
            start = time.monotonic()
            assert ok(server, pki)
            took.append(time.monotonic() - start)
        assert max(took) < CONFIG_TIMEOUT_SECONDS
        assert server.limits.evicted >= 10
    finally:
        stop.set()
        dripper.join(timeout=5)
        for s in slow:
            s.close()


@pytest.mark.parametrize(
    ("length", "code", "words"),
    [
        ("\u00b2", 400, "is not a number of bytes"),
        ("-1", 400, "is not a number of bytes"),
        ("1_0", 400, "is not a number of bytes"),
        ("9" * 5000, 413, "a 5000-digit number of bytes"),
        ("99999999999999999999", 413, "over the"),
    ],
    ids=["superscript", "negative", "underscore", "5000-digits", "20-digits"],
)
def test_content_length_is_parsed_strictly_and_always_answered(
    serve: Serve, pki: Pki, length: str, code: int, words: str
) -> None:
    server = serve()
    head = f"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    status, resp = answer(exchange(server, pki, head.encode()))
    assert status == code == resp["response"]["status"]["code"]
    assert words in resp["response"]["status"]["message"]
    assert resp["kind"] == "AdmissionReview" and resp["response"]["allowed"] is False
    assert ok(server, pki)


def test_two_different_content_lengths_are_refused(serve: Serve, pki: Pki) -> None:
    server = serve()
    head = b"POST /mutate HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    status, resp = answer(exchange(server, pki, head))
    assert status == 400
    assert resp["response"]["status"]["message"] == "Content-Length '2, 3' is not a number of bytes"


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        (b"GET /mutate\r\n", 400),  # HTTP/0.9: answered at once, no wait for headers
        (b"NOT A REQUEST LINE AT ALL\r\n\r\n", 400),
        (b"POST /mutate HTTP/2.0\r\n\r\n", 505),
        (b"PUT /mutate HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 501),
        (b"GET /mutate HTTP/1.1\r\n\r\n", 405),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"POST /mutate HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"POST /mutate HTTP/1.1\r\n" + b"X: y\r\n" * 120 + b"\r\n", 431),
    ],
    ids=[
        "http-0.9",
        "bad-line",
        "http-2",
        "put",
        "get-mutate",
        "long-uri",
        "long-header",
        "many-headers",
    ],
)
def test_http_server_errors_are_admission_reviews(
    serve: Serve, pki: Pki, request_bytes: bytes, code: int
) -> None:
    server = serve()
    start = time.monotonic()
    raw = exchange(server, pki, request_bytes)
    assert time.monotonic() - start < 2.0
    assert raw.startswith(f"HTTP/1.1 {code} ".encode())
    status, resp = answer(raw)
    assert status == code
    assert resp["apiVersion"] == "admission.k8s.io/v1" and resp["kind"] == "AdmissionReview"
    assert resp["response"]["status"]["code"] == code
    assert b"Content-Type: application/json" in raw and b"<html" not in raw


def test_error_answers_carry_the_uid_that_was_read(serve: Serve, pki: Pki) -> None:
    server = serve()
    c = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=5
    )
    bad = {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
    status, resp = post(c, json.dumps({**bad, "request": {"uid": "u-123"}}).encode())
    assert status == 400 and isinstance(resp, dict)
    assert resp["response"]["uid"] == "u-123"
    status, resp = post(c, b"{not json")
    assert status == 400 and isinstance(resp, dict) and resp["response"]["uid"] == ""
    c.close()


def test_headers_and_body_are_one_write(serve: Serve, pki: Pki) -> None:
    # an SSL read returns at most one TLS record: two writes would be two records
    server = serve()
    s = tls_socket(server, pki)
    body = json.dumps(review(POD)).encode()
    s.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    first = s.recv(1 << 20)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    head, _, rest = first.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length:"))[15:])
    assert len(rest) == length and json.loads(rest)["response"]["allowed"] is True
    assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) in (0, 1)  # a real socket
    s.close()


def test_log_lines_are_compact_json(
    serve: Serve, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(max_body=1024)
    with caplog.at_level(logging.INFO, logger="shmguard.webhook"):
        exchange(server, pki, b"POST /mutate HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")
        assert ok(server, pki)
        _, other_key = pki.issue("other")  # a reload that fails, then one that works
        os.replace(other_key, pki.dir / "server.key")
        assert ok(server, pki)  # a new connection looks at the files: the old pair is kept
        crt, key = pki.issue("next")
        os.replace(key, pki.dir / "server.key")
        os.replace(crt, pki.dir / "server.crt")
        assert ok(server, pki)
    lines = [r.getMessage() for r in caplog.records if r.name == "shmguard.webhook"]
    actions = [json.loads(line)["action"] for line in lines]
    assert actions.count("cert-reload") == 2 and "error" in actions and "inject" in actions
    for line in lines:
        assert json.dumps(json.loads(line), separators=(",", ":")) == line


def test_the_body_budget_refuses_beyond_it_with_an_admission_review(serve: Serve, pki: Pki) -> None:
    server = serve(max_body=MiB, body_budget=MiB, request_timeout=1.5)
    hog = tls_socket(server, pki)  # reserves the whole budget and sends its body slowly
    hog.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n{" % MiB)
    time.sleep(0.2)
    body = json.dumps(review(POD)).encode()
    head = b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
    status, resp = answer(exchange(server, pki, head + body))
    assert status == 503 and resp["response"]["status"]["code"] == 503
    assert "request bodies already in flight" in resp["response"]["status"]["message"]
    assert resp["response"]["allowed"] is False
    assert closed_by_peer(hog, 3.0)  # cut at its deadline, and the budget is back
    hog.close()
    assert ok(server, pki)


def test_an_abandoned_request_is_not_decided(serve: Serve, pki: Pki) -> None:
    server = serve(max_body=MiB, body_budget=MiB, request_timeout=2.0)
    hog = tls_socket(server, pki)  # holds all but 100 bytes of the budget
    hog.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n{" % (MiB - 100))
    time.sleep(0.2)
    gone = tls_socket(server, pki)  # sends a whole review, then leaves while it waits
    body = json.dumps(review(POD)).encode()
    gone.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(0.2)
    gone.close()
    hog.sendall(b"1" * (MiB - 101))  # the budget frees; the waiting request finds no client
    hog.recv(65536)
    hog.close()
    end = time.monotonic() + 5
    while server.abandoned == 0 and time.monotonic() < end:
        time.sleep(0.05)
    assert server.abandoned == 1
    assert ok(server, pki)


def test_swapped_certificate_and_key_is_one_clear_line(pki: Pki) -> None:
    crt, key = pki.dir / "server.crt", pki.dir / "server.key"
    r = subprocess.run(
        [
            *(sys.executable, "-m", "shmguard", "webhook"),
            "--tls-cert",
            str(key),
            "--tls-key",
            str(crt),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr == (
        f"shmguard: error: --tls-cert/--tls-key: {key} holds a private key and {crt} a "
        "certificate: swap the two files\n"
    )


def test_a_kept_alive_connection_waits_for_its_next_request_up_to_the_idle_timeout(
    serve: Serve, pki: Pki
) -> None:
    server = serve(request_timeout=0.5, idle_timeout=2.0)
    c = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=5
    )
    assert post(c, json.dumps(review(POD)).encode())[0] == 200
    time.sleep(1.0)  # longer than the request deadline, shorter than the idle timeout
    assert post(c, json.dumps(review(POD)).encode())[0] == 200
    assert c.sock is not None
    start = time.monotonic()
    assert closed_by_peer(c.sock, 5.0)
    assert 1.5 < time.monotonic() - start < 3.5
    c.close()


def test_a_body_budget_below_the_largest_body_is_a_one_line_error(pki: Pki) -> None:
    r = _cli_error(pki, "--body-budget", "1Mi")
    assert r.stderr == "shmguard: error: --body-budget 1Mi: must be at least --max-body (4Mi)\n"


def _post_pod(server: WebhookServer, pki: Pki, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    c = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=client_context(pki.ca_file), timeout=5
    )
    try:
        rev = review(obj)
        rev["request"]["uid"] = "u-77"
        status, resp = post(c, json.dumps(rev).encode())
    finally:
        c.close()
    assert isinstance(resp, dict)
    return status, resp


def test_a_pod_over_the_container_cap_gets_a_413_admission_review_with_its_uid(
    serve: Serve, pki: Pki
) -> None:
    server = serve()
    many = {**POD, "spec": {"containers": [{**TRAIN, "name": f"c{i}"} for i in range(300)]}}
    status, resp = _post_pod(server, pki, many)
    assert status == 413 == resp["response"]["status"]["code"]
    assert resp["response"]["uid"] == "u-77" and resp["response"]["allowed"] is False
    assert "300 containers, over the 256" in resp["response"]["status"]["message"]
    assert ok(server, pki)


@pytest.mark.parametrize(
    "obj",
    [
        {
            **POD,
            "metadata": {"name": "p", "annotations": {"shmguard.io/shm-size": "1e999"}},
            "spec": {"containers": [{**TRAIN, "resources": {"limits": {"memory": "8Gi"}}}]},
        },
        {
            **POD,
            "spec": {
                "containers": [{**TRAIN, "volumeMounts": [{"name": {"a": 1}, "mountPath": "/d"}]}],
                "volumes": [{"name": {"x": 1}, "emptyDir": {"medium": "Memory"}}],
            },
        },
    ],
    ids=["1e999-beside-a-limit", "volume-name-an-object"],
)
def test_hostile_pods_get_a_decision_and_no_error_line(
    serve: Serve, pki: Pki, obj: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    with caplog.at_level(logging.INFO, logger="shmguard.webhook"):
        status, resp = _post_pod(server, pki, obj)
    assert status == 200 and resp["response"]["allowed"] is True
    assert resp["response"]["uid"] == "u-77" and "patch" in resp["response"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_pipelined_reviews_are_each_answered(serve: Serve, pki: Pki) -> None:
    # the second request arrives with the first and waits in the server's read buffer,
    # where select cannot see it
    server = serve()
    body = json.dumps(review(POD)).encode()
    one = b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    raw = exchange(server, pki, one * 3, within=2.0)
    answers = [b"HTTP/1.1" + r for r in raw.split(b"HTTP/1.1")[1:]]
    assert len(answers) == 3
    assert all(answer(r)[0] == 200 for r in answers)

"""``shmguard recommend``'s bad input: one line on stderr naming the option, exit 2, nothing on
stdout (a Prometheus that answers but has no shmguard series, and a server that is not
Prometheus, are in test_recommend_prometheus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prom_proc import NEEDS_PROMETHEUS, PrometheusProcess, free_port
from typer.testing import CliRunner

from shmguard.cli import app


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["recommend", *args])
    return r.exit_code, r.stdout, r.stderr


def test_unreachable_prometheus() -> None:
    port = free_port()  # nothing listens there
    code, out, err = _run("--prometheus", f"http://127.0.0.1:{port}")
    assert (code, out) == (2, "")
    assert err == (
        f"shmguard: error: --prometheus: http://127.0.0.1:{port}: cannot reach it: "
        "[Errno 111] Connection refused\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--window", "7days"],
            "--window: invalid duration '7days': expected Prometheus's form, numbers with "
            "units y, w, d, h, m, s, ms from largest to smallest (7d, 1h30m, 90s)",
        ),
        (["--window", "0d"], "--window: invalid duration '0d': must be greater than 0"),
        # a new user's 1ms window gave rows "over 0s of the 1ms window (100%)"
        (
            ["--window", "1ms"],
            "--window 1ms: at least 1m; right-sizing reads history (7d is typical)",
        ),
        (["--percentile", "100"], "--percentile 100: must be above 0 and below 100"),
        (["--percentile", "p99"], "--percentile p99: not a number (e.g. 99 or 99.9)"),
        (["--fix"], "--fix goes with --manifests PATH (the files to change)"),
        (["--diff"], "--diff goes with --manifests PATH (the files to change)"),
        (
            ["--manifests", "/nonexistent/k8s"],
            "--manifests /nonexistent/k8s: no such file or directory",
        ),
        (
            ["--manifests", "-"],
            "--manifests -: standard input cannot be changed; give files or directories",
        ),
    ],
)
def test_bad_options(args: list[str], message: str) -> None:
    code, out, err = _run("--prometheus", "http://127.0.0.1:9", *args)
    assert (code, out, err) == (2, "", f"shmguard: error: {message}\n")


def test_not_a_url_and_patches_not_a_directory(tmp_path: Path) -> None:
    code, _, err = _run("--prometheus", "prometheus:9090")
    assert code == 2
    assert err == (
        "shmguard: error: --prometheus: 'prometheus:9090' is not an http:// or https:// URL\n"
    )
    code, _, err = _run("--prometheus", "http://u:pw@127.0.0.1:90x/")  # was a traceback
    assert (code, err) == (
        2,
        "shmguard: error: --prometheus: 'http://u:***@127.0.0.1:90x/': the port is not a "
        "number from 0 to 65535\n",
    )
    f = tmp_path / "file"
    f.write_text("")
    code, _, err = _run("--prometheus", "http://127.0.0.1:9", "--patches", str(f))
    assert (code, err) == (2, f"shmguard: error: --patches {f}: not a directory\n")


@NEEDS_PROMETHEUS
def test_basic_auth_and_a_path_prefix_against_a_real_prometheus(tmp_path: Path) -> None:
    """A real Prometheus behind basic auth (--web.config.file) under --web.route-prefix: the
    credentials in the URL are sent, never printed; a trailing slash is fine."""
    import base64

    # bcrypt of "s3cret" (cost 4), as Prometheus's web config wants; made with Python 3.11's
    # crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    digest = "$2b$04$qGdIxIqWKOP0hEibwJ6K8u0BcZz6uMLvH0S1xmCoeibtowTWOY9ke"
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  admin: '{digest}'\n")
    auth = ("Authorization", "Basic " + base64.b64encode(b"admin:s3cret").decode())
    prom = PrometheusProcess(
        tmp_path, [f"--web.config.file={web}", "--web.route-prefix=/prometheus"], [auth]
    )
    try:
        hostport = prom.url.split("//", 1)[1].split("/", 1)[0]
        with_auth = f"http://admin:s3cret@{hostport}/prometheus/"
        code, out, err = _run("--prometheus", with_auth, "--window", "5m")
        assert (code, out) == (2, "")  # through: the server has no shmguard series
        assert err == (
            f"shmguard: error: --prometheus: http://admin:***@{hostport}/prometheus: no "
            "shmguard series (shmguard_shm_used_bytes) in the last 5m: is the exporter scraped?\n"
        )
        code, _, err = _run("--prometheus", f"http://{hostport}/prometheus")
        assert code == 2
        assert err == (
            f"shmguard: error: --prometheus: http://{hostport}/prometheus: HTTP 401 "
            "Unauthorized (give the credentials in the URL: http://user:password@host)\n"
        )
        code, _, err = _run("--prometheus", f"http://admin:wrong@{hostport}/prometheus")
        assert "http://admin:***@" in err and "wrong" not in err and "HTTP 401" in err
    finally:
        prom.stop()

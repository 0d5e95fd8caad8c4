"""``shmguard recommend``'s bad input: one line on stderr naming the option, exit 2, nothing on
stdout (a Prometheus that answers but has no shmguard series, and a server that is not
Prometheus, are in test_recommend_prometheus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prom_proc import free_port
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
        (["--percentile", "100"], "--percentile 100: must be above 0 and below 100"),
        (["--percentile", "p99"], "--percentile p99: not a number (e.g. 99 or 99.9)"),
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
    f = tmp_path / "file"
    f.write_text("")
    code, _, err = _run("--prometheus", "http://127.0.0.1:9", "--patches", str(f))
    assert (code, err) == (2, f"shmguard: error: --patches {f}: not a directory\n")

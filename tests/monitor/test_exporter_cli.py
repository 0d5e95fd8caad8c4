"""``shmguard exporter`` as a process: serving, configuration, signals, bad input, a scrape
storm."""

from __future__ import annotations

import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from exporter_proc import ExporterProcess
from prometheus_client.parser import text_string_to_metric_families

from shmguard.monitor.exporter import METRICS


def _values(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if "owner" not in s.labels
    }


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serves_the_metrics_and_the_configured_need_and_stops_on_sigterm(tmp_path: Path) -> None:
    cfg = tmp_path / ".shmguard.toml"
    cfg.write_text('[exporter]\nrequired-shm = "3g"\n')
    exp = ExporterProcess(["--config", str(cfg), "--shm-path", str(tmp_path)])
    try:
        got = _values(exp.scrape())
        assert got["shmguard_up"] == 1
        assert got["shmguard_shm_required_bytes"] == 3 << 30
        assert got["shmguard_shm_size_bytes"] > 0
        assert {n.removesuffix("_total") for n in got} <= {
            m.removesuffix("_total") for m in METRICS
        }
    finally:
        assert exp.stop() == 0


def test_sigint_also_stops_it_cleanly(tmp_path: Path) -> None:
    exp = ExporterProcess(["--shm-path", str(tmp_path), "--required", "512m"])
    assert _values(exp.scrape())["shmguard_shm_required_bytes"] == 512 << 20
    exp.proc.send_signal(signal.SIGINT)
    assert exp.proc.wait(10) == 0
    assert exp.proc.stderr is not None
    assert b"Traceback" not in exp.proc.stderr.read()


def test_it_stops_on_sigterm_even_when_started_with_it_blocked(tmp_path: Path) -> None:
    # A parent that waits for signals with sigtimedwait (the sandbox, some init systems) passes
    # its blocked mask on: the exporter unblocks SIGTERM and SIGINT, as watch does.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        exp = ExporterProcess(["--shm-path", str(tmp_path)])
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert _values(exp.scrape())["shmguard_up"] == 1
    assert exp.stop(timeout=5) == 0  # not -9: SIGTERM reached it


def test_missing_shm_path_is_served_as_down() -> None:
    exp = ExporterProcess(["--shm-path", "/nonexistent/shm"])
    try:
        got = _values(exp.scrape())
        assert got["shmguard_up"] == 0
        assert "shmguard_shm_used_bytes" not in got
    finally:
        assert exp.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "localhost"], "--listen localhost: expected HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "--listen 127.0.0.1:99999: expected HOST:PORT"),
        (["--interval", "0"], "--interval: invalid duration"),
        (["--interval", "5m"], "--interval 5m: must be from 1ms to 60s"),
        (["--window", "1s"], "--window 1s: must be at least 10s"),
        (["--stall-after", "soon"], "--stall-after: invalid duration"),
        (["--required", "lots"], "--required"),
        (["--pid", "999999999"], "--pid 999999999: no such process"),
        (["--node-root", "/nonexistent"], "--node-root /nonexistent: not a directory"),
        (["--node-root", "/", "--pid", "1"], "--node-root: reads every pod's mounts"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    r = _run(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_configuration_key_is_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / ".shmguard.toml"
    cfg.write_text('[exporter]\nrequired-shm = "a lot"\n')
    r = _run("--config", str(cfg))
    assert r.returncode == 2
    assert "exporter.required-shm" in r.stderr
    cfg.write_text('[exporter]\nneed = "1g"\n')
    assert "exporter.need: unknown key" in _run("--config", str(cfg)).stderr


def test_address_in_use_is_exit_2(tmp_path: Path) -> None:
    exp = ExporterProcess(["--shm-path", str(tmp_path)])
    try:
        r = _run("--listen", f"127.0.0.1:{exp.port}", "--shm-path", str(tmp_path))
        assert r.returncode == 2
        assert f"--listen 127.0.0.1:{exp.port}:" in r.stderr
    finally:
        exp.stop()


@pytest.mark.slow
def test_scrape_storm_does_not_crash_or_grow(tmp_path: Path) -> None:
    exp = ExporterProcess(["--shm-path", str(tmp_path), "--interval", "10ms"])
    try:
        proc = psutil.Process(exp.proc.pid)
        with ThreadPoolExecutor(8) as pool:
            bodies = list(pool.map(lambda _: exp.scrape(), range(200)))
            rss_warm = proc.memory_info().rss
            bodies += list(pool.map(lambda _: exp.scrape(), range(1800)))
        rss_end = proc.memory_info().rss
        assert len(bodies) == 2000
        assert all("shmguard_up" in b for b in bodies)
        # 1800 more scrapes after warm-up: growth is noise, not per-scrape state.
        assert rss_end - rss_warm < 8 << 20, (rss_warm, rss_end)
        assert _values(exp.scrape())["shmguard_up"] == 1
    finally:
        assert exp.stop() == 0

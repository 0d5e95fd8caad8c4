"""A real Prometheus 2.x (Debian package ``prometheus``) scrapes the exporter on loopback while
a real process fills a private tmpfs /dev/shm; the values are read back from Prometheus's HTTP
API (https://prometheus.io/docs/prometheus/latest/querying/api/)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_helpers import MiB, exists_in, wait_for

from shmguard.monitor.exporter import ExporterOptions, ExporterServer, ShmCollector

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="the prometheus binary is not installed (Debian package prometheus; .ci/run "
        "installs it)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return bytes(r.read())


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Prometheus on a free loopback port with an empty data dir; yields (base URL, the
    config file to write targets into before the first scrape) and is stopped at the end."""
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {}\nscrape_configs: []\n")
    proc = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            try:
                return _get(f"{base}/-/ready").startswith(b"Prometheus Server is Ready")
            except OSError:
                return False

        assert wait_for(ready, timeout=60, every=0.2), "prometheus did not become ready"
        yield base, config
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _query(base: str, expr: str) -> float | None:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    data = json.loads(_get(url))
    result = data["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_used_and_peak_of_a_filling_tmpfs(
    root_only: None, shm_box, prometheus: tuple[str, Path]
) -> None:
    base, config = prometheus
    # A 40 MiB spike shorter than the scrape interval, then 20 MiB held.
    box = shm_box(
        "sleep 2; head -c 40M /dev/zero > /dev/shm/spike; sleep 0.2; rm /dev/shm/spike; "
        "head -c 20M /dev/zero > /dev/shm/keep; touch /dev/shm/done; sleep 120"
    )
    collector = ShmCollector(
        ExporterOptions(
            shm_path=str(box.shm_path),
            interval=0.05,
            window=60,
            bucket=1,
            labels={"namespace": "ml", "pod": "train-0", "container": "trainer"},
        )
    )
    collector.start()
    server = ExporterServer(collector, "127.0.0.1", 0)
    try:
        config.write_text(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: shmguard\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{server.port}']}}]\n"
        )
        urllib.request.urlopen(urllib.request.Request(f"{base}/-/reload", method="POST"))
        box.release()
        assert wait_for(exists_in(box, "done"))

        def settled() -> bool:
            used = _query(base, 'shmguard_shm_used_bytes{pod="train-0"}')
            return used is not None and 20 * MiB <= used < 21 * MiB

        assert wait_for(settled, timeout=30, every=0.5)
        assert _query(base, 'up{job="shmguard"}') == 1
        assert _query(base, 'shmguard_up{namespace="ml",container="trainer"}') == 1
        assert _query(base, "shmguard_shm_size_bytes") == 64 * MiB
        peak = _query(base, "shmguard_shm_peak_bytes")
        assert peak is not None and 40 * MiB <= peak < 61 * MiB
        owner = _query(base, 'shmguard_shm_owner_bytes{owner="other"}')
        assert owner == 20 * MiB
        assert _query(base, "shmguard_stalled") == 0
    finally:
        server.shutdown()

"""A real Prometheus 2.x (Debian package ``prometheus``) scrapes the exporter on loopback while
a real process fills a private tmpfs /dev/shm; the values are read back from Prometheus's HTTP
API (https://prometheus.io/docs/prometheus/latest/querying/api/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_helpers import MiB, exists_in, wait_for
from prom_proc import NEEDS_PROMETHEUS, PrometheusProcess

from shmguard.monitor.exporter import ExporterOptions, ExporterServer, ShmCollector

pytestmark = [pytest.mark.slow, NEEDS_PROMETHEUS]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[PrometheusProcess]:
    """A Prometheus on a free loopback port with an empty data dir, stopped at the end."""
    prom = PrometheusProcess(tmp_path)
    try:
        yield prom
    finally:
        prom.stop()


def _query(prom: PrometheusProcess, expr: str) -> float | None:
    result = prom.query(expr)["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_used_and_peak_of_a_filling_tmpfs(
    root_only: None, shm_box, prometheus: PrometheusProcess
) -> None:
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
        prometheus.scrape([server.port])
        box.release()
        assert wait_for(exists_in(box, "done"))

        def settled() -> bool:
            used = _query(prometheus, 'shmguard_shm_used_bytes{pod="train-0"}')
            return used is not None and 20 * MiB <= used < 21 * MiB

        assert wait_for(settled, timeout=30, every=0.5)
        assert _query(prometheus, 'up{job="shmguard"}') == 1
        assert _query(prometheus, 'shmguard_up{namespace="ml",container="trainer"}') == 1
        assert _query(prometheus, "shmguard_shm_size_bytes") == 64 * MiB
        peak = _query(prometheus, "shmguard_shm_peak_bytes")
        assert peak is not None and 40 * MiB <= peak < 61 * MiB
        owner = _query(prometheus, 'shmguard_shm_owner_bytes{owner="other"}')
        assert owner == 20 * MiB
        assert _query(prometheus, "shmguard_stalled") == 0
    finally:
        server.shutdown()

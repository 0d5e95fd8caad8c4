"""``shmguard recommend`` on a node-mode exporter (the DaemonSet) scraped by a real Prometheus
(Debian package ``prometheus``) on loopback: the node is laid out with real tmpfs mounts in a
private mount namespace (node_prom_child.py), two pods of one Deployment with a memory emptyDir
and one pod in the /dev/shm containerd gave it. Rows are per workload and emptyDir, sized from
the peak Prometheus holds through the sizing policy; no memory limit is proposed (node mode has
no cgroup figures)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitor_helpers import MiB, recommend, wait_for
from node_prom_child import INFER, TRAIN
from prom_proc import NEEDS_PROMETHEUS, PrometheusProcess, free_port

from shmguard.estimate.policy import shm_size_for

pytestmark = [pytest.mark.slow, pytest.mark.root, NEEDS_PROMETHEUS]
CHILD = Path(__file__).with_name("node_prom_child.py")
UNSHARE = ("unshare", "--mount", "--propagation", "private", "--fork")


@pytest.fixture
def scraped_node(tmp_path: Path) -> Iterator[PrometheusProcess]:
    """Prometheus scraping a node-mode exporter (1 s) after the pods filled their /dev/shm."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    port = free_port()
    child = subprocess.Popen(
        [*UNSHARE, sys.executable, str(CHILD), str(tmp_path / "node"), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    prom = PrometheusProcess(tmp_path)
    status = None
    try:
        prom.scrape([port])
        up = lambda: bool(prom.query("shmguard_up == 1")["data"]["result"])  # noqa: E731
        assert wait_for(up, timeout=30, every=0.5)
        child.stdin.write("fill\n")
        child.stdin.flush()
        assert child.stdout.readline() == "ok\n"

        def settled() -> bool:
            q = f'shmguard_shm_used_bytes{{pod="{TRAIN[1][1]}"}}'
            r = prom.query(q)["data"]["result"]
            return bool(r) and float(r[0]["value"][1]) >= 10 * MiB

        assert wait_for(settled, timeout=30, every=0.5)
        time.sleep(2)  # a scrape after the spike's window has it for certain
        yield prom
    finally:
        child.stdin.write("stop\n")
        child.stdin.flush()
        status = child.stdout.readline().strip()
        child.wait(30)
        prom.stop()
    assert status == "0"  # SIGTERM stopped the exporter cleanly


def _peak(prom: PrometheusProcess, selector: str) -> int:
    q = prom.query(f"max(max_over_time(shmguard_shm_peak_bytes{{{selector}}}[120s]))")
    return int(float(q["data"]["result"][0]["value"][1]))


def test_recommend_reads_node_mode_series_per_workload_and_volume(
    scraped_node: PrometheusProcess, tmp_path: Path
) -> None:
    prom = scraped_node
    out = tmp_path / "patches"
    args = ("--prometheus", prom.url, "--window", "2m", "--min-samples", "3")
    r = recommend(*args, "--json", "--patches", str(out))
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)["workloads"]
    rows = {(w["namespace"], w["kind"], w["workload"]): w for w in found}
    assert set(rows) == {("ml", "Deployment", "train"), ("serve", "Deployment", "infer")}
    train, infer = rows["ml", "Deployment", "train"], rows["serve", "Deployment", "infer"]
    # the two pods of Deployment train, one row for their emptyDir "dshm"
    assert (train["volume"], train["container"]) == ("dshm", "")
    assert sorted(train["pods"]) == sorted(pod for _, pod in TRAIN)
    peak = _peak(prom, 'namespace="ml"')
    assert train["peak"] == peak == 60 * MiB  # the 0.2 s spike, between two scrapes
    assert train["size"] == 256 * MiB
    assert train["recommendation"]["shm_size"] == shm_size_for(peak).bytes == 80 * MiB
    # node mode reads no cgroup: no memory limit is proposed
    assert train["memory_limit"] is None
    assert train["recommendation"]["memory_limit"]["value"] is None
    # the pod without a volume: containerd's 64 MiB sandbox /dev/shm, held at 56 MiB
    assert (infer["volume"], infer["pods"]) == ("", [INFER[1]])
    assert infer["size"] == 64 * MiB
    assert infer["peak"] == _peak(prom, 'namespace="serve"') == 56 * MiB
    assert infer["recommendation"]["shm_size"] == shm_size_for(56 * MiB).bytes
    assert infer["shm_change"] == shm_size_for(56 * MiB).bytes - 64 * MiB > 0
    # a patch for the emptyDir; none for the pod whose series names no container or volume
    assert train["patch"] == str(out / "ml-deployment-train-dshm.yaml")
    body: Any = yaml.safe_load(Path(train["patch"]).read_text())
    volumes = body["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "80Mi"}}]
    assert infer["patch"] is None
    assert sorted(p.name for p in out.iterdir()) == ["ml-deployment-train-dshm.yaml"]
    text = recommend(*args, "--patches", str(tmp_path / "again"))
    assert text.returncode == 0, text.stderr
    assert "ml/Deployment/train (dshm)" in text.stdout
    assert (
        "no patch for serve/Deployment/infer -: the series names neither a container nor a "
        "volume" in text.stdout
    )

"""``shmguard recommend`` against a real Prometheus (Debian package ``prometheus``) on loopback
that scrapes two real ``shmguard exporter`` processes, each watching a sandbox whose private
tmpfs /dev/shm a real process fills: the proposal follows from the peak Prometheus holds
through the sizing policy, and the patch it writes applies to a Deployment."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from exporter_proc import ExporterProcess
from monitor_helpers import MiB, recommend, wait_for
from pod_farm import FakePod, PodFarm
from prom_proc import NEEDS_PROMETHEUS, PrometheusProcess

from schema_registry import validator
from shmguard.estimate.policy import memory_limit_for, shm_size_for

pytestmark = [pytest.mark.slow, NEEDS_PROMETHEUS]

#: Two pods of Deployment "train" (ReplicaSet train-7c9f8b6d5d), as the controllers name them.
PODS = ("train-7c9f8b6d5d-x2x4k", "train-7c9f8b6d5d-qz7wp")
#: What each pod's process does once /dev/shm/go exists: a 60 MiB spike shorter than the
#: scrape interval then 20 MiB held; 10 MiB held.
SCRIPTS = (
    "head -c 60M /dev/zero > /dev/shm/spike; sleep 0.2; rm /dev/shm/spike; "
    "head -c 20M /dev/zero > /dev/shm/keep",
    "head -c 10M /dev/zero > /dev/shm/keep",
)
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
        - name: trainer
          image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
          resources: {limits: {memory: 512Mi}}
"""


@pytest.fixture
def scraped_jobs(root_only: None, tmp_path: Path) -> Iterator[tuple[PrometheusProcess, Any]]:
    """Prometheus scraping two exporters (1 s) on two filled sandboxes, once both have
    written; yields (prometheus, the first exporter)."""
    wait_go = "while [ ! -e /dev/shm/go ]; do sleep 0.05; done; sleep 1.5"
    pods = [
        FakePod(
            "ml",
            pod,
            "trainer",
            f"{wait_go}; {script}; touch /dev/shm/done; sleep 300",
            shm_size=256 * MiB,
            memory_limit=512 * MiB,
        )
        for pod, script in zip(PODS, SCRIPTS, strict=True)
    ]
    prom = PrometheusProcess(tmp_path)
    farm = None
    try:
        farm = PodFarm(pods)
        boxes, exporters = farm.boxes, farm.exporters
        prom.scrape(farm.ports)

        def scraped() -> bool:
            r = prom.query("count(shmguard_up == 1)")["data"]["result"]
            return bool(r) and r[0]["value"][1] == "2"

        assert wait_for(scraped, timeout=30, every=0.5)
        for box in boxes:
            Path(box.shm_path, "go").touch()
        assert all(wait_for(lambda b=b: Path(b.shm_path, "done").exists()) for b in boxes)

        def settled() -> bool:
            r = prom.query('min(shmguard_shm_used_bytes{pod=~"train-.*"})')["data"]["result"]
            return bool(r) and float(r[0]["value"][1]) >= 10 * MiB

        assert wait_for(settled, timeout=30, every=0.5)
        time.sleep(2)  # a scrape after the peak window has the spike for certain
        yield prom, exporters[0]
    finally:
        codes = farm.close() if farm is not None else []
        prom.stop()
    assert codes == [0, 0]  # SIGTERM stopped both exporters cleanly


def test_recommend_sizes_from_the_peak_in_prometheus_and_writes_a_patch(
    scraped_jobs: tuple[PrometheusProcess, Any], tmp_path: Path
) -> None:
    prom, exporter = scraped_jobs
    _text_and_errors(prom, exporter)
    out = tmp_path / "patches"
    r = recommend(
        "--prometheus", prom.url, "--window", "2m", "--min-samples", "5", "--json",
        "--patches", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    validator("recommend").validate(data)
    assert data["owners"] == "pod names" and data["window"] == "2m"
    (train,) = data["workloads"]
    assert (train["kind"], train["workload"], train["container"]) == (
        "Deployment",
        "train",
        "trainer",
    )
    assert sorted(train["pods"]) == sorted(PODS)
    # the need is the highest peak Prometheus holds for the workload's pods
    q = prom.query('max(max_over_time(shmguard_shm_peak_bytes{pod=~"train-.*"}[120s]))')
    peak = int(float(q["data"]["result"][0]["value"][1]))
    assert train["peak"] == peak == 60 * MiB  # the spike, shorter than a scrape interval
    proposed = shm_size_for(peak).bytes
    assert train["recommendation"]["shm_size"] == proposed == 80 * MiB
    assert train["size"] == 256 * MiB and train["shm_change"] == proposed - 256 * MiB
    assert train["memory_limit"] == 512 * MiB
    memory = memory_limit_for(proposed, current_limit=512 * MiB, current_shm=256 * MiB)
    assert train["recommendation"]["memory_limit"] == memory
    assert train["memory_change"] == memory - 512 * MiB
    assert train["enough_history"] and train["samples"] >= 5
    assert 0 < train["coverage"] <= 1
    # the patch: a strategic merge patch kubectl applies to the Deployment's manifest
    patch = Path(train["patch"])
    assert patch == out / "ml-deployment-train.yaml"
    body = yaml.safe_load(patch.read_text())
    volumes = body["spec"]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "80Mi"}}]
    _manifests(prom, tmp_path, proposed, memory)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(DEPLOYMENT)
    applied = subprocess.run(
        [kubectl, "patch", "--local", "-f", str(manifest), "-p", patch.read_text(), "-o", "yaml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr
    obj = yaml.safe_load(applied.stdout)
    (c,) = obj["spec"]["template"]["spec"]["containers"]
    assert c["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "dshm"}]
    assert c["resources"]["limits"]["memory"] == "1280Mi" == f"{memory // MiB}Mi"
    assert c["image"].startswith("pytorch/")  # the rest of the manifest is kept
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(obj, "1.30", strict=True)


def _manifests(prom: PrometheusProcess, tmp_path: Path, shm: int, memory: int) -> None:
    """--manifests on a copy of the Deployment's manifest: shown, then as a diff, then
    written; check finds nothing after, the object validates, a second run changes nothing."""
    k8s = tmp_path / "k8s"
    k8s.mkdir()
    train, web = k8s / "train.yaml", k8s / "web.yaml"
    train.write_text(DEPLOYMENT)
    web.write_text(DEPLOYMENT.replace("train", "web").replace("pytorch/pytorch", "nginx"))
    base = ("--prometheus", prom.url, "--window", "2m", "--min-samples", "5", "--manifests")
    r = recommend(*base, str(k8s))
    assert r.returncode == 0, r.stderr
    change = f"ml/Deployment/train container 'trainer': memory limit 512Mi -> {memory // MiB}Mi"
    assert f"would change {train}: {change}\n" in r.stdout
    assert f"{web}: no recommended workload in it\n" in r.stdout
    assert train.read_text() == DEPLOYMENT  # nothing written without --fix
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [\n")
    r = recommend(*base, str(bad), "--manifests", str(train))
    assert r.returncode == 2  # as check says it, and the other file is still done
    assert r.stderr.startswith(f"shmguard: error: {bad}:2:1: invalid-yaml: ")
    assert f"would change {train}: {change}\n" in r.stdout
    r = recommend(*base, str(train), "--diff")
    assert r.returncode == 0, r.stderr
    assert (
        f"+++ b/{train}\n" in r.stdout and f"+            sizeLimit: {shm // MiB}Mi\n" in r.stdout
    )
    assert train.read_text() == DEPLOYMENT
    r = recommend(*base, str(train), "--fix", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    validator("recommend").validate(data)
    (edited,) = data["manifests"]["files"]
    assert data["manifests"]["written"] and change in edited["changes"]
    assert edited["left"] == [] and edited["not_applied"] == []
    obj = yaml.safe_load(train.read_text())
    spec = obj["spec"]["template"]["spec"]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm // MiB}Mi"}}
    ]
    assert spec["containers"][0]["resources"] == {"limits": {"memory": f"{memory // MiB}Mi"}}
    checked = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", str(train)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("0 findings")
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(obj, "1.30", strict=True)
    before = train.read_bytes()
    r = recommend(*base, str(train), "--fix")
    assert r.returncode == 0, r.stderr
    assert f"{train}: already as proposed for ml/Deployment/train trainer\n" in r.stdout
    assert train.read_bytes() == before


def _text_and_errors(prom: PrometheusProcess, exporter: ExporterProcess) -> None:
    r = recommend("--prometheus", prom.url, "--window", "2m")
    assert r.returncode == 0, r.stderr
    assert "ml/Deployment/train" in r.stdout
    assert "not enough history" in r.stdout
    assert "ml/Deployment/train trainer: history: not enough history: " in r.stdout
    assert "; 100 needed\n" in r.stdout
    assert "peak over 2m 60 MiB + 25% headroom = 75 MiB, rounded up to 80 MiB" in r.stdout
    # no series in that namespace; the exporter's /metrics is no Prometheus API
    r = recommend("--prometheus", prom.url, "--namespace", "nowhere")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"shmguard: error: --prometheus: {prom.url}: no shmguard series "
        "(shmguard_shm_used_bytes) in namespace nowhere in the last 7d: is the exporter "
        "scraped?\n"
    )
    r = recommend("--prometheus", f"http://127.0.0.1:{exporter.port}")
    assert r.returncode == 2
    assert r.stderr == (
        f"shmguard: error: --prometheus: http://127.0.0.1:{exporter.port}: not a Prometheus "
        "API answer (not JSON)\n"
    )

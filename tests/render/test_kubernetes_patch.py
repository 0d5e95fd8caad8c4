"""The strategic merge patch of ``recommend --patches``: where the pod spec lies per kind, what
is left out, and that kubectl applies it to a manifest when kubectl is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shmguard.fix.k8s import POD_SPEC_PATHS, named_plan, strategic_merge_patch

MiB = 1 << 20
ANN = "shmguard.io/shm-size"


def kubernetes_patch(
    kind: str,
    shm: int | None,
    limits: dict[str, int | None],
    volume: str | None = None,
    annotation: str | None = None,
) -> dict[str, object] | None:
    """The fix plan for a workload known by its containers' names, as a strategic merge
    patch (what ``recommend --patches`` writes)."""
    return strategic_merge_patch(kind, named_plan(shm, limits, volume), annotation)


def test_paths_per_kind() -> None:
    full = {"trainer": 3 * 1024 * MiB}
    pod = kubernetes_patch("Pod", 256 * MiB, full, annotation=ANN)
    assert pod == {
        "metadata": {"annotations": {ANN: "256Mi"}},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                    "resources": {"limits": {"memory": "3Gi"}},
                }
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}}],
        },
    }
    cron = kubernetes_patch("CronJob", 256 * MiB, full, annotation=ANN)
    assert cron == {"spec": {"jobTemplate": {"spec": {"template": pod}}}}
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "Job/DaemonSet"):
        assert kubernetes_patch(kind, 256 * MiB, full, annotation=ANN) == {
            "spec": {"template": pod}
        }
    assert "TrainingJob" not in POD_SPEC_PATHS
    assert kubernetes_patch("TrainingJob", 256 * MiB, full) is None


def test_what_is_left_out() -> None:
    # /dev/shm kept: only the memory limit; nothing changes: no patch
    only_memory = kubernetes_patch("Deployment", None, {"a": 2048 * MiB, "b": None}, annotation=ANN)
    assert only_memory == {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "a", "resources": {"limits": {"memory": "2Gi"}}}]}
            }
        }
    }
    assert kubernetes_patch("Deployment", None, {"a": None}) is None
    # a node-mode series names the emptyDir but no container: the volume alone is resized
    node = kubernetes_patch("StatefulSet", 96 * MiB, {"": None}, volume="cache-shm")
    assert node == {
        "spec": {
            "template": {
                "spec": {
                    "volumes": [
                        {"name": "cache-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "96Mi"}}
                    ]
                }
            }
        }
    }


MANIFEST = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ml}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: job
              image: python:3.12
              volumeMounts: [{name: old, mountPath: /dev/shm}]
              resources: {limits: {memory: 1Gi}}
          volumes: [{name: old, emptyDir: {medium: Memory}}]
"""


def test_kubectl_applies_it_to_a_cronjob_manifest(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    patch = kubernetes_patch("CronJob", 160 * MiB, {"job": 1280 * MiB}, annotation=ANN)
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text(MANIFEST)
    done = subprocess.run(
        [
            kubectl,
            "patch",
            "--local",
            "-f",
            str(manifest),
            "-p",
            yaml.safe_dump(patch),
            "-o",
            "yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)["spec"]["jobTemplate"]["spec"]["template"]
    assert spec["metadata"]["annotations"] == {ANN: "160Mi"}
    (c,) = spec["spec"]["containers"]
    # mounts merge by mountPath: the /dev/shm mount now names dshm; the old volume stays
    assert c["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "dshm"}]
    assert c["resources"]["limits"]["memory"] == "1280Mi"
    names = {v["name"]: v for v in spec["spec"]["volumes"]}
    assert names["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "160Mi"}
    assert set(names) == {"old", "dshm"}
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(yaml.safe_load(done.stdout), "1.30", strict=True)

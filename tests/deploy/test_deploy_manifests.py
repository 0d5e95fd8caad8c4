"""deploy/kubernetes: the sidecar Job and the node DaemonSet (and deploy/docker's docker run
lines) pass `shmguard check` with no findings, validate against the Kubernetes 1.37 schema
(kubernetes-validate, strict), and say what docs/deploy.md says: the sidecar shares the trainer's
/dev/shm volume and process namespace, the DaemonSet mounts read-only exactly the node paths
inspect.node reads below its --node-root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from shmguard.estimate.policy import Policy
from shmguard.inspect import node
from shmguard.units import k8s_quantity_bytes

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
SIDECAR = DEPLOY / "sidecar.yaml"
DAEMONSET = DEPLOY / "daemonset.yaml"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_shmguard_check_finds_nothing() -> None:
    # the manifests, and the docker run lines of the Docker example and its README
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--json", str(DEPLOY.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = {Path(f["file"]).name: f["kind"] for f in json.loads(r.stdout)["files"]}
    assert kinds == {
        "sidecar.yaml": "kubernetes",
        "daemonset.yaml": "kubernetes",
        "run-with-exporter.sh": "run-lines",
        "README.md": "run-lines",
        # the exporter's alert rules, their promtool tests and the Grafana dashboard: no
        # container in them, read as plain YAML (JSON is YAML)
        "shmguard-rules.yaml": "yaml",
        "shmguard-rules.test.yaml": "yaml",
        "prometheus.yml": "yaml",
        "shmguard.json": "yaml",
        # the admission webhook's kustomize base (tests/fleet/test_webhook_deploy.py)
        **{
            f"{name}.yaml": "kubernetes"
            for name in (
                "certificate",
                "deployment",
                "kustomization",
                "mutatingwebhookconfiguration",
                "namespace",
                "poddisruptionbudget",
                "service",
                "serviceaccount",
            )
        },
        # the generated ValidatingAdmissionPolicy (a policy, not a workload: tests/fleet)
        "validating-admission-policy.yaml": "kubernetes",
        # the image (deploy/image; tests/packaging/test_image.py): no docker run of a job in
        # them, read as text. deploy/kubernetes has a kustomization.yaml too (the same entry).
        "Dockerfile": "text",
        "build.sh": "text",
    }
    for f in json.loads(r.stdout)["files"]:
        assert f["findings"] == [] and f["diagnostics"] == [], f


@pytest.mark.parametrize("path", [SIDECAR, DAEMONSET], ids=lambda p: p.name)
def test_validates_against_kubernetes_1_37(path: Path) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for doc in docs(path):
        kv.validate(doc, "1.37", strict=True)


def test_sidecar_shares_the_trainers_dev_shm_and_processes() -> None:
    (job,) = docs(SIDECAR)
    spec = job["spec"]["template"]["spec"]
    assert spec["shareProcessNamespace"] is True
    (exporter,) = spec["initContainers"]
    (train,) = spec["containers"]
    assert exporter["restartPolicy"] == "Always"  # a native sidecar: the Job still completes
    assert exporter["command"] == ["shmguard", "exporter", "--listen", "0.0.0.0:9808"]
    assert exporter["ports"][0]["containerPort"] == 9808
    env = {e["name"]: e for e in exporter["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["CONTAINER_NAME"]["value"] == train["name"]

    def shm_volume(container: dict[str, Any]) -> str:
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        return str(mount["name"])

    assert shm_volume(exporter) == shm_volume(train)
    (vol,) = [v for v in spec["volumes"] if v["name"] == shm_volume(train)]
    assert vol["emptyDir"]["medium"] == "Memory"
    shm = k8s_quantity_bytes(vol["emptyDir"]["sizeLimit"])
    assert (
        k8s_quantity_bytes(train["resources"]["limits"]["memory"]) >= shm + Policy().memory_margin
    )


def test_daemonset_mounts_read_only_the_node_paths_the_scanner_reads() -> None:
    account, ds = docs(DAEMONSET)
    assert account["kind"] == "ServiceAccount" and account["automountServiceAccountToken"] is False
    spec = ds["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert spec["automountServiceAccountToken"] is False
    (c,) = spec["containers"]
    argv = c["command"]
    assert argv[:4] == ["shmguard", "exporter", "--listen", "0.0.0.0:9808"]
    root = argv[argv.index("--node-root") + 1]
    assert root == "/host"
    sec = c["securityContext"]
    assert sec["readOnlyRootFilesystem"] and not sec["allowPrivilegeEscalation"]
    assert sec["capabilities"]["drop"] == ["ALL"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounted = {}
    for m in c["volumeMounts"]:
        assert m["readOnly"] is True
        assert m["mountPath"] == root + host[m["name"]]  # the node path, below --node-root
        mounted[host[m["name"]]] = m.get("mountPropagation")
    # what inspect.node reads, by default, and tmpfs mounts made later must propagate in
    assert mounted == {
        node.KUBELET_ROOT + "/pods": "HostToContainer",
        node.POD_LOGS_DIR: None,
        node.CONTAINERD_STATE: "HostToContainer",
        node.CRIO_RUNROOT: "HostToContainer",
    }

"""Kubernetes pod specs per kind, Compose services, ECS and daemon.json, workload detection.

CRD shapes follow each project's documentation (paths cited in
src/shmguard/sources/k8s_kinds.py): Kubeflow PyTorchJob/MPIJob (training-operator
release-1.9 examples), TrainJob (kubeflow.org/docs/components/trainer), KubeRay RayCluster
(ray-operator/config/samples), JobSet, LeaderWorkerSet, Volcano Job (volcano.sh docs),
Argo Workflow (argo-workflows examples), KServe InferenceService (kserve.github.io docs).
"""

from __future__ import annotations

import json

import pytest

from shmguard.sources.detect import pod_container_workload, run_workload, service_workload
from shmguard.sources.load import load_bytes
from shmguard.sources.yamlnode import YScalar

POD = "{containers: [{name: main, image: pytorch/pytorch, volumeMounts: [{name: dshm, mountPath: /dev/shm}], resources: {limits: {memory: 8Gi, nvidia.com/gpu: 1}}}], volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}]}"  # noqa: E501

CASES = {
    "v1/Pod": (f"spec: {POD}", [""]),
    "v1/PodTemplate": (f"template: {{spec: {POD}}}", [""]),
    "apps/v1/Deployment": (f"spec: {{template: {{spec: {POD}}}}}", [""]),
    "batch/v1/CronJob": (
        f"spec: {{jobTemplate: {{spec: {{template: {{spec: {POD}}}}}}}}}",
        ["jobTemplate"],
    ),
    "kubeflow.org/v1/PyTorchJob": (
        f"spec: {{pytorchReplicaSpecs: {{Master: {{template: {{spec: {POD}}}}}, "
        f"Worker: {{template: {{spec: {POD}}}}}}}}}",
        ["pytorchReplicaSpecs.Master", "pytorchReplicaSpecs.Worker"],
    ),
    "ray.io/v1/RayCluster": (
        f"spec: {{headGroupSpec: {{template: {{spec: {POD}}}}}, "
        f"workerGroupSpecs: [{{template: {{spec: {POD}}}}}]}}",
        ["headGroupSpec", "workerGroupSpecs[0]"],
    ),
    "jobset.x-k8s.io/v1alpha2/JobSet": (
        f"spec: {{replicatedJobs: [{{template: {{spec: {{template: {{spec: {POD}}}}}}}}}]}}",
        ["replicatedJobs[0]"],
    ),
    "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": (
        f"spec: {{leaderWorkerTemplate: {{workerTemplate: {{spec: {POD}}}}}}}",
        ["leaderWorkerTemplate.workerTemplate"],
    ),
    "batch.volcano.sh/v1alpha1/Job": (
        f"spec: {{tasks: [{{template: {{spec: {POD}}}}}]}}",
        ["tasks[0]"],
    ),
    "serving.knative.dev/v1/Service": (f"spec: {{template: {{spec: {POD}}}}}", [""]),
    "serving.kserve.io/v1beta1/InferenceService": (
        "spec: {predictor: {model: {modelFormat: {name: huggingface}, image: vllm/vllm}, "
        "volumes: [{name: dshm, emptyDir: {medium: Memory}}]}}",
        ["predictor"],
    ),
    "argoproj.io/v1alpha1/Workflow": (
        "spec: {volumes: [{name: dshm, emptyDir: {medium: Memory}}], templates: "
        "[{name: a, steps: []}, {name: b, container: {image: pytorch/pytorch}}]}",
        ["templates[1]"],
    ),
    "trainer.kubeflow.org/v1alpha1/TrainJob": (
        "spec: {runtimeRef: {name: torch-distributed}, trainer: {image: pytorch/pytorch, "
        "numNodes: 2, resourcesPerNode: {limits: {nvidia.com/gpu: 1}}}}",
        ["trainer"],
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_pod_spec_found_for_every_kind(key: str) -> None:
    api, _, kind = key.rpartition("/")
    body, roles = CASES[key]
    data = f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: x}}\n{body}\n".encode()
    lf = load_bytes(data, "m.yaml")
    assert lf.kind == "kubernetes" and not lf.diagnostics
    assert [p.role for p in lf.pod_specs] == roles
    pod = lf.pod_specs[0]
    assert pod.containers, key
    assert pod_container_workload(pod, pod.containers[0]).cls == "ml"
    for v in pod.volumes:
        if isinstance(v.medium, YScalar):
            assert data[v.medium.start : v.medium.end] == b"Memory"


def test_list_notes_and_annotations() -> None:
    data = b"""apiVersion: v1
kind: List
items:
- apiVersion: kubeflow.org/v2beta1
  kind: MPIJob
  metadata:
    name: m
    annotations: {shmguard.io/workload: container, shmguard.io/dataloader: "num_workers=4"}
  spec:
    mpiReplicaSpecs:
      Launcher: {template: {spec: {containers: [
        {name: l, image: mpi, env: [{name: NCCL_DEBUG, value: INFO}]}]}}}
      Worker: {template: {spec: {hostIPC: true, containers: [{name: w, image: mpi}]}}}
"""
    lf = load_bytes(data, "l.yaml")
    launcher, worker = lf.pod_specs
    assert launcher.notes == ("mpi-launcher",) and worker.host_ipc is not None
    wl = pod_container_workload(launcher, launcher.containers[0])
    assert wl.cls == "container" and wl.loader == "num_workers=4"
    assert [e.kind for e in wl.evidence] == ["annotation", "env"]
    assert launcher.annotations["shmguard.io/workload"].path == (
        'items[0].metadata.annotations["shmguard.io/workload"]'
    )


def test_compose_merges_extends_and_fields() -> None:
    data = b"""x-gpu: &gpu
  deploy: {resources: {reservations: {devices: [{driver: nvidia, capabilities: [gpu]}]}}}
  shm_size: 2gb
services:
  base:
    image: python
    environment: [A=1, NCCL_DEBUG=INFO]
    ipc: host
  train:
    <<: *gpu
    extends: base
    environment: {A: "2"}
    tmpfs: [/dev/shm:size=1g]
    volumes: ["/srv/shm:/dev/shm", {type: tmpfs, target: /dev/shm, tmpfs: {size: 1g}}]
    build: {context: ., shm_size: 1g}
"""
    lf = load_bytes(data, "anything.yml")
    assert lf.kind == "compose"
    base, train = lf.compose[0].services
    assert train.ipc is not None and train.ipc.path == "services.base.ipc"
    assert isinstance(train.shm_size, YScalar) and train.shm_size.shared
    assert data[train.shm_size.start : train.shm_size.end] == b"2gb"
    assert {e.name: e.value.value for e in train.environment if e.value} == {  # type: ignore[union-attr]
        "A": "2",
        "NCCL_DEBUG": "NCCL_DEBUG=INFO",
    }
    assert [(m.kind, m.target) for m in train.mounts] == [
        ("tmpfs", "/dev/shm"),
        ("bind", "/dev/shm"),
        ("tmpfs", "/dev/shm"),
    ]
    assert train.build_shm_size is not None and len(train.gpu_devices) == 1
    wl = service_workload(train)
    assert wl.cls == "ml" and {e.kind for e in wl.evidence} == {"env", "gpu"}
    assert service_workload(base).cls == "ml"  # NCCL_DEBUG


def test_ecs_and_daemon_json_positions_match_json() -> None:
    td = {
        "family": "t",
        "containerDefinitions": [
            {
                "name": "é",
                "image": "vllm/vllm",
                "memory": 4096,
                "linuxParameters": {"sharedMemorySize": 2048},
            },
        ],
    }
    data = json.dumps(td, indent="\t", ensure_ascii=False).encode()
    lf = load_bytes(data, "task.json")
    (c,) = lf.ecs[0].containers
    assert c.name == "é" and isinstance(c.shared_memory_size, YScalar)
    assert data[c.shared_memory_size.start : c.shared_memory_size.end] == b"2048"
    assert c.shared_memory_size.yaml11() == 2048 and c.memory.yaml11() == 4096  # type: ignore[union-attr]
    lf = load_bytes(b'{"default-shm-size": "2G", "default-ipc-mode": "shareable"}', "daemon.json")
    (dc,) = lf.daemon
    assert dc.default_shm_size is not None and dc.default_shm_size.raw == '"2G"'


def test_run_line_workload() -> None:
    lf = load_bytes(b"docker run --gpus all -e X=1 ubuntu bash\n", "r.sh")
    wl = run_workload(lf.run_lines[0])
    assert wl.cls == "ml" and [e.what for e in wl.evidence] == ["--gpus all"]
    lf = load_bytes(b"docker run -e X=1 nginx\n", "r.sh")
    assert run_workload(lf.run_lines[0]).cls == "container"

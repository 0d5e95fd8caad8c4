"""SHM001's and SHM008's Kubernetes fixes: a memory emptyDir at /dev/shm spliced into the file.

Every fixed file is checked four ways: only insertions (every original byte kept, in order),
a second fix changes nothing, each ML container mounts a memory emptyDir with the intended
sizeLimit at /dev/shm, and the fixed object validates against the real Kubernetes 1.37 schema
(kubernetes-validate, strict: unknown fields fail; for CRDs the pod template is validated as a
core Pod's spec).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import pytest
import yaml

from shmguard.estimate.policy import Policy
from shmguard.lint.check import CheckOptions, check_loaded, fix_file
from shmguard.lint.config._base import fix_size, fix_sized, with_size_problem
from shmguard.sources.load import load_bytes
from shmguard.sources.workload import Workload
from shmguard.units import GiB, MiB, format_k8s_quantity, k8s_quantity_bytes

kv = pytest.importorskip("kubernetes_validate")

K8S = "1.37"
DEFAULT = fix_size(CheckOptions(), Workload("ml"), None)
assert DEFAULT is not None


def only_insertions(old: bytes, new: bytes) -> bool:
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in ops)


def at(obj: Any, path: str) -> Any:
    for name, idx in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        obj = obj[int(idx)] if idx else obj[name]
    return obj


def fixed(text: str, **kw: Any) -> bytes:
    data = text.encode()
    r = fix_file(data, "x.yaml", CheckOptions(**kw))
    assert only_insertions(data, r.data), r.data.decode()
    again = fix_file(r.data, "x.yaml", CheckOptions(**kw))
    assert again.data == r.data and again.rounds == 0
    assert not [f for f in again.remaining.findings if f.code == "SHM001"]
    return r.data


def validate(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Validate every object (List items too; CRD pod templates as Pods); return the ML pod
    specs as (kind, spec)."""
    lf = load_bytes(data, "x.yaml")
    docs = [d for d in yaml.safe_load_all(data) if d is not None]
    out = []
    for pod in lf.pod_specs:
        doc = docs[pod.obj.doc]
        spec = at(doc, pod.path)
        obj = at(doc, pod.obj.node.path) if pod.obj.node.path else doc
        if pod.obj.api_version in ("v1", "apps/v1", "batch/v1"):
            kv.validate(obj, K8S, strict=True)
        kv.validate(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"}, "spec": spec},
            K8S,
            strict=True,
        )
        out.append((pod.obj.kind, spec))
    return out


def shm_volume(spec: dict[str, Any], container: str) -> dict[str, Any]:
    c = next(c for c in spec["containers"] if c["name"] == container)
    name = next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm")
    vol: dict[str, Any] = next(v for v in spec["volumes"] if v["name"] == name)
    assert vol["emptyDir"]["medium"] == "Memory"
    return vol


TRAIN = "image: pytorch/pytorch:2.3.0\n"


def test_pod_block_without_volumes_gets_both_keys() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p  # keep\nspec:\n  containers:\n"
        "    - name: train\n      " + TRAIN + "      command: ['torchrun', \"t.py\"]  # c\n"
        "  restartPolicy: Never\n"
    )
    data = fixed(text)
    q = format_k8s_quantity(DEFAULT)
    assert data.decode() == text.replace(
        "# c\n", "# c\n      volumeMounts:\n        - name: dshm\n          mountPath: /dev/shm\n"
    ) + (
        "  volumes:\n    - name: dshm\n      emptyDir:\n        medium: Memory\n"
        f"        sizeLimit: {q}\n"
    )
    ((kind, spec),) = validate(data)
    assert kind == "Pod"
    vol = shm_volume(spec, "train")
    assert vol == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": q}}


def test_deployment_indentless_flow_volumes_and_crlf() -> None:
    text = (
        "apiVersion: apps/v1\r\nkind: Deployment\r\nmetadata:\r\n  name: d\r\nspec:\r\n"
        "  selector: {matchLabels: {app: d}}\r\n  template:\r\n    metadata:\r\n"
        "      labels: {app: d}\r\n    spec:\r\n      containers:\r\n      - name: serve\r\n"
        "        image: vllm/vllm-openai:v0.6.0\r\n        volumeMounts:\r\n"
        "        - {name: data, mountPath: /data}\r\n      volumes: []\r\n"
    )
    data = fixed(text)
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert b"      volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}]\r\n" in data
    assert (
        b"        - {name: data, mountPath: /data}\r\n        - name: dshm\r\n"
        b"          mountPath: /dev/shm\r\n" in data
    )
    ((_, spec),) = validate(data)
    assert shm_volume(spec, "serve")["emptyDir"]["sizeLimit"] == "1Gi"


def test_job_name_clash_and_memory_cap() -> None:
    text = """\
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: train
          image: pytorch/pytorch:2.3.0
          resources:
            limits: {memory: 2Gi, nvidia.com/gpu: 1}
          volumeMounts:
            - name: dshm
              mountPath: /data
      volumes:
        - name: dshm
          hostPath: {path: /srv/data}
"""
    data = fixed(text)
    ((_, spec),) = validate(data)
    vol = shm_volume(spec, "train")
    assert vol["name"] == "dshm-1"
    size = k8s_quantity_bytes(vol["emptyDir"]["sizeLimit"])
    assert size == fix_size(CheckOptions(), Workload("ml"), 2 * GiB)
    assert size + Policy().memory_margin <= 2 * GiB


def test_cronjob_and_list_and_shm_size_option() -> None:
    text = """\
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: c}
  spec:
    schedule: "0 * * * *"
    jobTemplate:
      spec:
        template:
          spec:
            restartPolicy: OnFailure
            containers:
            - name: train
              image: pytorch/pytorch:2.3.0
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec: {containers: [{name: t, image: "pytorch/pytorch:2.3.0"}]}
"""
    data = fixed(text, shm_size=3 * GiB)
    specs = validate(data)
    assert [k for k, _ in specs] == ["CronJob", "Pod"]
    for (_, spec), name in zip(specs, ("train", "t"), strict=True):
        assert shm_volume(spec, name)["emptyDir"]["sizeLimit"] == "3Gi"
    for item in yaml.safe_load(data)["items"]:
        kv.validate(item, K8S, strict=True)


def test_pytorchjob_master_and_worker_two_containers_share_one_volume() -> None:
    text = """\
# training job
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: t
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.3.0
              command: ["torchrun", "train.py"]
    Worker:
      replicas: 2
      template:
        metadata:
          annotations: {shmguard.io/shm-size: 4Gi}
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.3.0
            - name: second
              image: pytorch/pytorch:2.3.0
              env: [{name: NCCL_DEBUG, value: INFO}]
          volumes:
            - name: cache
              emptyDir: {}
---
"""
    data = fixed(text)
    specs = validate(data)
    assert len(specs) == 2
    master, worker = (s for _, s in specs)
    assert shm_volume(master, "pytorch")["emptyDir"]["sizeLimit"] == "1Gi"
    assert shm_volume(worker, "pytorch")["emptyDir"]["sizeLimit"] == "4Gi"
    assert shm_volume(worker, "second") == shm_volume(worker, "pytorch")
    assert [v["name"] for v in worker["volumes"]] == ["cache", "dshm"]


def test_anchored_pod_spec_is_shown_not_applied() -> None:
    text = """\
x: &tpl
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: *tpl
"""
    r = check_loaded(load_bytes(text.encode(), "x.yaml"))
    f = next(f for f in r.findings if f.code == "SHM001")
    assert f.fix is not None and f.fix.edits == () and f.fix.applicability.value == "display-only"


def test_shm008_size_limit_unsafe_by_default_safe_with_shm_size() -> None:
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0
      volumeMounts: [{name: shm, mountPath: /dev/shm}]
  volumes:
    - name: shm
      emptyDir:
        medium: Memory   # tmpfs
"""
    data = text.encode()
    assert fix_file(data, "x.yaml").data == data  # the default size is a guess: unsafe
    r = fix_file(data, "x.yaml", unsafe=True)
    assert r.data == data + b"        sizeLimit: 1Gi\n"
    r = fix_file(data, "x.yaml", CheckOptions(shm_size=2 * GiB))
    assert r.data == data + b"        sizeLimit: 2Gi\n"
    ((_, spec),) = validate(r.data)
    assert shm_volume(spec, "train")["emptyDir"]["sizeLimit"] == "2Gi"
    flow = text.replace("emptyDir:\n        medium: Memory   # tmpfs", "emptyDir: {medium: Memory}")
    r = fix_file(flow.encode(), "x.yaml", unsafe=True)
    assert b"emptyDir: {medium: Memory, sizeLimit: 1Gi}\n" in r.data
    validate(r.data)


def test_fix_size_reads_the_dataloader_annotation_and_the_memory_limit() -> None:
    # The webhook's and `shmguard plan`'s 896 MiB (check --fix wrote the 1 GiB default before
    # issue 19 fix A), and no size where the memory limit cannot hold it beside the margin.
    wl = Workload("ml", loader="num_workers=8,batch_size=64,sample_shape=3x224x224")
    assert fix_size(CheckOptions(), wl, None) == 896 * MiB
    assert fix_size(CheckOptions(), wl, 2 * GiB) == 896 * MiB  # 896 MiB + 1 GiB fits
    assert fix_size(CheckOptions(), wl, int(1.5 * GiB)) is None  # it does not: no room
    assert fix_size(CheckOptions(shm_size=GiB), wl, int(1.5 * GiB)) == GiB  # taken as given
    sized = fix_sized(CheckOptions(), Workload("ml", loader="batch_size=8"), None)
    shown = with_size_problem("m", sized)
    assert shown == "m; shmguard.io/dataloader ignored: num_workers is missing"

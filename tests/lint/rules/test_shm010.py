"""SHM010 `shm-size-near-memory-limit`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import fixed, found

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes

COMPOSE_MEMORY = """\
services:
  above:
    image: pytorch/pytorch
    shm_size: "16g"
    mem_limit: 8g
  close:
    image: pytorch/pytorch
    shm_size: 8g
    deploy: {resources: {limits: {memory: "8.5g"}}}
  fine:
    image: pytorch/pytorch
    shm_size: 1g
    mem_limit: 2g
  dead:
    image: pytorch/pytorch
    ipc: host
    shm_size: 16g
    mem_limit: 1g
"""


POD_MEMORY = """\
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  containers:
    - name: train
      image: pytorch/pytorch
      command: [torchrun, train.py]
      resources: {limits: {memory: 8Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
    - name: big
      image: pytorch/pytorch
      resources: {limits: {memory: 4Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 8Gi}
"""


def test_shm010_compose_above_and_too_close() -> None:
    got = found(COMPOSE_MEMORY, "compose.yaml", "SHM010")
    assert [g[:4] for g in got] == [("warning", 4, 15, "unsafe"), ("warning", 8, 15, "unsafe")]
    assert "above the memory limit (8 GiB)" in got[0][4]
    assert "leaves 512 MiB of the 8.5 GiB memory limit" in got[1][4]
    out = fixed(COMPOSE_MEMORY, "compose.yaml", "SHM010", unsafe=True)
    # policy.memory_limit_for: the size plus the 1 GiB margin, rounded up
    assert "    mem_limit: 17g\n" in out and '{memory: "9g"}' in out
    assert "    mem_limit: 2g\n" in out and "    mem_limit: 1g\n" in out
    assert found(out, "compose.yaml", "SHM010") == []


def test_shm010_run_line_and_margin_from_policy() -> None:
    from shmguard.estimate.policy import Policy
    from shmguard.lint.check import CheckOptions
    from shmguard.units import GiB

    src = "docker run --shm-size=16g --memory=16g pytorch/pytorch python train.py\n"
    got = found(src, "run.sh", "SHM010")
    assert [g[:4] for g in got] == [("warning", 1, 12, "unsafe")]
    assert fixed(src, "run.sh", "SHM010", unsafe=True) == src.replace("=16g p", "=17g p")
    opts = CheckOptions(policy=Policy(memory_margin=GiB // 4))
    ok = "docker run --shm-size=1g --memory=1.5g pytorch/pytorch python train.py\n"
    assert found(ok, "run.sh", "SHM010") != []
    r = check_loaded(load_bytes(ok.encode(), "run.sh"), opts)
    assert [f.code for f in r.findings if f.code == "SHM010"] == []


def test_shm010_kubernetes_too_close_but_not_what_shm009_reports() -> None:
    got = found(POD_MEMORY, "pod.yaml", "SHM010")
    assert [g[:4] for g in got] == [("warning", 17, 45, "unsafe")]
    assert "'train'" in got[0][4] and "leaves 0 B" in got[0][4]
    shm009 = found(POD_MEMORY, "pod.yaml", "SHM009")
    assert len(shm009) == 1 and "'big'" in shm009[0][4]
    out = fixed(POD_MEMORY, "pod.yaml", "SHM010", unsafe=True)
    assert "{limits: {memory: 9Gi}}" in out and "{limits: {memory: 4Gi}}" in out


# Issue 21: an unsized memory emptyDir is sized to the memory limit by the kubelet
# (calculateEmptyDirMemorySize), the same as sizeLimit equal to the limit. Shaped as
# kubernetes/examples AI/vllm-deployment/vllm-deployment.yaml.
VLLM_UNSIZED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-gemma-deployment
spec:
  replicas: 1
  selector:
    matchLabels:
      app: gemma-server
  template:
    metadata:
      labels:
        app: gemma-server
    spec:
      containers:
      - name: inference-server
        image: vllm/vllm-openai:latest
        resources:
          requests:
            cpu: "2"
            memory: "10Gi"
            nvidia.com/gpu: "1"
          limits:
            cpu: "2"
            memory: "10Gi"
            nvidia.com/gpu: "1"
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args:
        - --model=$(MODEL_ID)
        - --tensor-parallel-size=1
        volumeMounts:
        - mountPath: /dev/shm
          name: dshm
      volumes:
      - name: dshm
        emptyDir:
          medium: Memory
"""


def test_unsized_memory_emptydir_is_judged_as_sized_to_the_limit() -> None:
    got = found(VLLM_UNSIZED, "vllm.yaml", "SHM010")
    assert [g[:4] for g in got] == [("warning", 37, 19, "unsafe")]
    assert "kubelet sizes it to the 10 GiB memory limit" in got[0][4]
    explicit = VLLM_UNSIZED.replace(
        "medium: Memory\n", "medium: Memory\n          sizeLimit: 10Gi\n"
    )
    assert [g[:2] for g in found(explicit, "vllm.yaml", "SHM010")] == [("warning", 38)]
    out = fixed(VLLM_UNSIZED, "vllm.yaml", "SHM010", unsafe=True)
    assert out == VLLM_UNSIZED.replace(
        "medium: Memory\n", "medium: Memory\n          sizeLimit: 1Gi\n"
    )
    assert found(out, "vllm.yaml", "SHM010") == []
    # without a memory limit it stays SHM008's case
    no_limit = VLLM_UNSIZED.replace('            memory: "10Gi"\n', "")
    assert found(no_limit, "vllm.yaml", "SHM010") == []
    assert [g[0] for g in found(no_limit, "vllm.yaml", "SHM008")] == ["warning"]

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

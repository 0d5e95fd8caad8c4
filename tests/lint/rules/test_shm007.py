"""SHM007 `dshm-not-mounted`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import fixed, found

POD_SIDECAR = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    spec:
      initContainers:
        - name: warm
          image: busybox
          volumeMounts: [{name: dshm, mountPath: /dev/shm}]
      containers:
        - name: train
          image: pytorch/pytorch
          command: [torchrun, train.py]
        - name: log-shipper
          image: fluent/fluent-bit
          volumeMounts: [{name: dshm, mountPath: /dev/shm}]
      volumes:
        - name: dshm
          emptyDir: {medium: Memory, sizeLimit: 8Gi}
"""


POD_UNMOUNTED = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: train
      image: pytorch/pytorch
      command: [torchrun, train.py]
      volumeMounts: [{name: scratch, mountPath: /tmp}]
  volumes:
    - {name: scratch, emptyDir: {medium: Memory}}
    - {name: shm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}
"""


def test_shm007_dshm_only_in_sidecar_and_init_container() -> None:
    got = found(POD_SIDECAR, "job.yaml", "SHM007")
    assert [g[:4] for g in got] == [("error", 12, 17, "safe")]
    assert "only in container 'log-shipper', init container 'warm'" in got[0][4]
    assert found(POD_SIDECAR, "job.yaml", "SHM001") == []  # one finding per fact
    out = fixed(POD_SIDECAR, "job.yaml", "SHM007")
    assert out == POD_SIDECAR.replace(
        "          command: [torchrun, train.py]\n",
        "          command: [torchrun, train.py]\n"
        "          volumeMounts:\n            - name: dshm\n              mountPath: /dev/shm\n",
    )
    assert found(out, "job.yaml", "SHM007") == [] and found(out, "job.yaml", "SHM001") == []


def test_shm007_volume_mounted_nowhere_and_not_a_tmp_emptydir() -> None:
    got = found(POD_UNMOUNTED, "pod.yaml", "SHM007")
    assert [g[:4] for g in got] == [("error", 6, 13, "safe")]
    assert "'shm' is mounted by no container" in got[0][4]
    out = fixed(POD_UNMOUNTED, "pod.yaml", "SHM007")
    assert "[{name: scratch, mountPath: /tmp}, {name: shm, mountPath: /dev/shm}]" in out
    # a memory emptyDir at /tmp only is no /dev/shm volume: SHM001 (no volume at all) instead
    only_tmp = POD_UNMOUNTED.replace(
        "    - {name: shm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}\n", ""
    )
    assert found(only_tmp, "pod.yaml", "SHM007") == []
    assert len(found(only_tmp, "pod.yaml", "SHM001")) == 1


def test_shm007_not_with_host_ipc_and_shm013_by_container_name() -> None:
    host = POD_UNMOUNTED.replace("spec:\n", "spec:\n  hostIPC: true\n", 1)
    assert found(host, "pod.yaml", "SHM007") == []
    compose = (
        "services:\n  a:\n    image: x\n    container_name: donor\n"
        "  b:\n    image: y\n    ipc: container:donor\n"
    )
    got = found(compose, "c.yaml", "SHM013")
    assert [g[:4] for g in got] == [("error", 7, 10, "safe")]
    assert fixed(compose, "c.yaml", "SHM013").startswith("services:\n  a:\n    ipc: shareable\n")

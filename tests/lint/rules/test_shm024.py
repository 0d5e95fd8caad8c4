"""SHM024 `ipc-sysctl-for-shm`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from _rule_helpers import found

POD_SYSCTLS = """\
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  securityContext:
    sysctls:
      - {name: kernel.shmmax, value: "68719476736"}
      - name: kernel.shm_rmid_forced
        value: "1"
      - {name: net.core.somaxconn, value: "1024"}
      - {name: fs.mqueue.msg_max, value: "100"}
  containers:
    - name: train
      image: pytorch/pytorch
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}
"""


def test_shm024_kubernetes_unsafe_ipc_sysctls_not_the_safe_one() -> None:
    got = found(POD_SYSCTLS, "pod.yaml", "SHM024")
    assert [g[:4] for g in got] == [("error", 7, 16, None), ("error", 11, 16, None)]
    assert "SysctlForbidden" in got[0][4] and "kernel.shmmax" in got[0][4]


def test_shm024_host_ipc_refuses_every_ipc_sysctl() -> None:
    src = POD_SYSCTLS.replace("spec:\n", "spec:\n  hostIPC: true\n", 1)
    got = found(src, "pod.yaml", "SHM024")
    assert [g[:4] for g in got] == [
        ("error", 8, 16, None),
        ("error", 9, 15, None),  # kernel.shm_rmid_forced: safe, but not with hostIPC
        ("error", 12, 16, None),
    ]
    assert all("hostIPC: true" in g[4] for g in got)


def test_shm024_compose_and_run_are_info() -> None:
    compose = """\
services:
  a:
    image: pytorch/pytorch
    shm_size: 1g
    sysctls:
      kernel.shmmax: 68719476736
      net.core.somaxconn: 1024
  b:
    image: pytorch/pytorch
    shm_size: 1g
    sysctls: ["kernel.shmall=18446744073692774399", "kernel.msgmax=65536"]
"""
    got = found(compose, "compose.yaml", "SHM024")
    assert [g[:4] for g in got] == [("info", 6, 7, None), ("info", 11, 15, None)]
    run = "docker run --shm-size=1g --sysctl kernel.shmmax=68719476736 pytorch/pytorch\n"
    got = found(run, "run.sh", "SHM024")
    assert [g[:4] for g in got] == [("info", 1, 26, None)]
    assert "does not size /dev/shm" in got[0][4]


def test_shm024_host_ipc_in_compose_and_run_is_an_error() -> None:
    compose = (
        "services:\n  a:\n    image: pytorch/pytorch\n    ipc: host\n"
        "    sysctls: {kernel.msgmax: 65536, net.core.somaxconn: 1024}\n"
    )
    got = found(compose, "compose.yaml", "SHM024")
    assert [g[:4] for g in got] == [("error", 5, 15, None)]
    assert "host IPC" in got[0][4]
    run = "docker run --ipc=host --sysctl kernel.shmmax=1 pytorch/pytorch\n"
    assert [g[:4] for g in found(run, "run.sh", "SHM024")] == [("error", 1, 23, None)]

"""SHM007, SHM010, SHM013 and SHM024 on small sources: exact line:column, severity, fix."""

from __future__ import annotations

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes


def found(src: str, name: str, code: str) -> list[tuple[str, int, int, str | None, str]]:
    r = check_loaded(load_bytes(src.encode(), name))
    out = []
    for f in r.findings:
        if f.code != code:
            continue
        assert f.location is not None
        app = f.fix.applicability.value if f.fix is not None and f.fix.edits else None
        out.append((f.severity.value, f.location.line or 0, f.location.column or 0, app, f.message))
    return out


def fixed(src: str, name: str, code: str, *, unsafe: bool = False) -> str:
    """``src`` with the edits of every ``code`` finding applied (they never overlap here)."""
    data = src.encode()
    edits = []
    for f in check_loaded(load_bytes(data, name)).findings:
        if f.code != code or f.fix is None or not f.fix.edits:
            continue
        if unsafe or f.fix.applicability.value == "safe":
            edits.extend(f.fix.edits)
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        data = data[: e.start] + e.content.encode() + data[e.end :]
    return data.decode()


COMPOSE_DONOR = """\
services:
  server:
    image: vllm/vllm-openai
    shm_size: "8g"
  sidecar:
    image: busybox
    ipc: "service:server"
  priv:
    image: busybox
    ipc: private
  joins_priv:
    image: busybox
    ipc: service:priv
  share:
    image: busybox
    ipc: shareable
  joins_share:
    image: busybox
    ipc: service:share
  joins_outside:
    image: busybox
    ipc: service:elsewhere
"""


def test_shm013_compose_donor_without_shareable() -> None:
    got = found(COMPOSE_DONOR, "compose.yaml", "SHM013")
    assert [g[:4] for g in got] == [("error", 7, 10, "safe"), ("error", 13, 10, "safe")]
    assert "non-shareable IPC" in got[0][4] and "'server'" in got[0][4]


def test_shm013_compose_fix_sets_donor_shareable() -> None:
    out = fixed(COMPOSE_DONOR, "compose.yaml", "SHM013")
    assert out.startswith("services:\n  server:\n    ipc: shareable\n    image: vllm/vllm-openai\n")
    assert "  priv:\n    image: busybox\n    ipc: shareable\n" in out
    assert found(out, "compose.yaml", "SHM013") == []


def test_shm013_not_for_podman_compose_or_host_donor() -> None:
    from shmguard.lint.check import CheckOptions
    from shmguard.model.target import parse_target

    opts = CheckOptions(target=parse_target("compose=podman-compose"))
    r = check_loaded(load_bytes(COMPOSE_DONOR.encode(), "c.yaml"), opts)
    assert [f for f in r.findings if f.code == "SHM013"] == []
    host = "services:\n  a:\n    image: x\n    ipc: host\n  b:\n    image: y\n    ipc: service:a\n"
    assert found(host, "c.yaml", "SHM013") == []


RUN = """\
docker run -d --name donor --shm-size=8g vllm/vllm-openai
docker run --rm --ipc=container:donor busybox ls /dev/shm
docker run -d --name shared --ipc=shareable busybox sleep 1
docker run --ipc=container:shared busybox true
podman run -d --name pdonor busybox sleep 1
podman run --ipc=container:pdonor busybox true
docker run --ipc=container:unknown busybox true
"""


def test_shm013_run_line_donor_in_same_file() -> None:
    got = found(RUN, "run.sh", "SHM013")
    assert [g[:4] for g in got] == [("error", 2, 17, "safe")]
    assert "started on line 1" in got[0][4]
    out = fixed(RUN, "run.sh", "SHM013")
    assert (
        out.splitlines()[0]
        == "docker run --ipc=shareable -d --name donor --shm-size=8g vllm/vllm-openai"
    )
    assert found(out, "run.sh", "SHM013") == []


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


def test_shm010_kubernetes_too_close_but_not_what_shm009_reports() -> None:
    got = found(POD_MEMORY, "pod.yaml", "SHM010")
    assert [g[:4] for g in got] == [("warning", 17, 45, "unsafe")]
    assert "'train'" in got[0][4] and "leaves 0 B" in got[0][4]
    shm009 = found(POD_MEMORY, "pod.yaml", "SHM009")
    assert len(shm009) == 1 and "'big'" in shm009[0][4]
    out = fixed(POD_MEMORY, "pod.yaml", "SHM010", unsafe=True)
    assert "{limits: {memory: 9Gi}}" in out and "{limits: {memory: 4Gi}}" in out


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

"""What /dev/shm a Compose service, a run line or a pod's container gets (:func:`shm_state`,
used by the user-defined check templates of :mod:`shmguard.lint.custom`).

The runtimes' documented defaults when nothing is set (Docker ``--shm-size`` default 64 MiB,
moby ``DefaultShmSize``; Podman ``containers.conf(5)`` ``shm_size = "65536k"``; Kubernetes:
the container runtime's 64 MiB unless a volume is mounted at /dev/shm), the host's (or another
container's) with ``ipc: host`` / ``--ipc=host`` / ``hostIPC: true`` or a bind mount, else the
size set.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.lint.config._base import (
    Unit,
    ipc_mode,
    is_dev_shm,
    run_mount_target,
    run_shm_mounts,
)
from shmguard.model.finding import Location
from shmguard.sources.k8s_model import Container, text
from shmguard.sources.yamlnode import YNode, YScalar
from shmguard.units import (
    DOCKER_DEFAULT_SHM,
    PODMAN_DEFAULT_SHM,
    SizeError,
    k8s_quantity_bytes,
    parse_docker_size,
    parse_tmpfs_size,
)


@dataclass(frozen=True)
class ShmState:
    """A unit's (or one container's) /dev/shm: ``kind`` is ``size`` (``bytes`` set),
    ``default`` (nothing set: ``bytes`` is the runtime's default), ``shared`` (the host's or
    another container's IPC namespace or /dev/shm), ``unbounded`` (a memory-backed emptyDir
    with no ``sizeLimit``) or ``unknown`` (a placeholder or unreadable value); ``what`` says
    what was seen, ``location`` where."""

    kind: str
    bytes: int | None
    what: str
    location: Location | None = None


def _docker_size(node: YNode | None, what: str) -> ShmState | None:
    if not isinstance(node, YScalar):
        return None
    if node.placeholder:
        return ShmState("unknown", None, f"{what}: {node.value}", node.location())
    try:
        return ShmState("size", parse_docker_size(node.value, legacy=True), f"{what}: {node.value}",
                        node.location())  # fmt: skip
    except SizeError:
        return ShmState("unknown", None, f"{what}: {node.value}", node.location())


def _compose_state(unit: Unit) -> ShmState:
    svc = unit.service
    assert svc is not None
    ipc = svc.get("ipc")
    if ipc_mode(text(ipc)) in ("host", "container"):
        assert ipc is not None
        return ShmState("shared", None, f"ipc: {text(ipc)}", ipc.location())
    for m in svc.mounts:
        if not is_dev_shm(m.target):
            continue
        if m.kind == "tmpfs":
            if isinstance(m.size, YScalar):
                found = _docker_size(m.size, "tmpfs.size")
                if found is not None:
                    return found
            opts = dict(o.partition("=")[::2] for o in (m.options or "").split(","))
            if opts.get("size"):
                try:
                    n = parse_tmpfs_size(opts["size"])
                except SizeError:
                    return ShmState("unknown", None, f"tmpfs {m.options}", m.node.location())
                return ShmState("size", n, f"tmpfs /dev/shm:{m.options}", m.node.location())
            continue
        return ShmState("shared", None, f"{m.kind} mount at /dev/shm", m.node.location())
    found = _docker_size(svc.get("shm_size"), "shm_size")
    if found is not None:
        return found
    return ShmState("default", DOCKER_DEFAULT_SHM, "no shm_size (the runtime's 64 MiB)")


def _run_state(unit: Unit) -> ShmState:
    rl = unit.run
    assert rl is not None
    where = unit.src

    def loc(start: int, end: int) -> Location:
        line, col = where.line_col(start)
        return Location(unit.file, line, col, start=start, end=end)

    ipc = rl.last("--ipc")
    if ipc is not None and ipc_mode(ipc.value) in ("host", "container"):
        return ShmState("shared", None, f"--ipc={ipc.value}",
                        loc(ipc.flag_start, ipc.value_end or ipc.flag_end))  # fmt: skip
    for f in run_shm_mounts(rl):
        at = loc(f.flag_start, f.value_end or f.flag_end)
        if f.name == "--tmpfs":
            _, _, opts = (f.value or "").partition(":")
            size = dict(o.partition("=")[::2] for o in opts.split(",")).get("size")
            if not size:
                continue
            try:
                return ShmState("size", parse_tmpfs_size(size), f"--tmpfs {f.value}", at)
            except SizeError:
                return ShmState("unknown", None, f"--tmpfs {f.value}", at)
        if run_mount_target(f) is not None:
            return ShmState("shared", None, f"{f.spelled} {f.value}", at)
    flag = rl.last("--shm-size")
    if flag is not None and flag.value is not None:
        at = loc(flag.flag_start, flag.value_end or flag.flag_end)
        try:
            return ShmState("size", parse_docker_size(flag.value, legacy=True),
                            f"--shm-size {flag.value}", at)  # fmt: skip
        except SizeError:
            return ShmState("unknown", None, f"--shm-size {flag.value}", at)
    if rl.tool == "podman":
        return ShmState("default", PODMAN_DEFAULT_SHM, "no --shm-size (Podman's 65,536,000 bytes)")
    return ShmState("default", DOCKER_DEFAULT_SHM, "no --shm-size (the runtime's 64 MiB)")


def _container_state(unit: Unit, c: Container) -> ShmState:
    pod = unit.pod
    assert pod is not None
    if pod.host_ipc is not None and text(pod.host_ipc) == "true":
        return ShmState("shared", None, "hostIPC: true", pod.host_ipc.location())
    volumes = {v.name: v for v in pod.volumes}
    for m in c.volume_mounts:
        if not is_dev_shm(text(m.mount_path)):
            continue
        v = volumes.get(m.name or "")
        at = m.node.location()
        if v is None or v.empty_dir is None:
            return ShmState("shared", None, f"volume {m.name} at /dev/shm", at)
        if text(v.medium) != "Memory":
            return ShmState("unknown", None, f"disk-backed emptyDir {m.name} at /dev/shm", at)
        if not isinstance(v.size_limit, YScalar):
            return ShmState("unbounded", None, f"emptyDir {m.name} without sizeLimit", at)
        try:
            n = k8s_quantity_bytes(v.size_limit.value)
        except SizeError:
            return ShmState("unknown", None, f"sizeLimit: {v.size_limit.value}", at)
        return ShmState("size", n, f"emptyDir {m.name} sizeLimit: {v.size_limit.value}",
                        v.size_limit.location())  # fmt: skip
    return ShmState("default", DOCKER_DEFAULT_SHM, "no /dev/shm volume (the runtime's 64 MiB)")


def shm_state(unit: Unit, container: Container | None = None) -> ShmState:
    """The /dev/shm of a Compose service, a run line, or ``container`` of a pod unit."""
    if unit.service is not None:
        return _compose_state(unit)
    if unit.run is not None:
        return _run_state(unit)
    assert container is not None
    return _container_state(unit, container)

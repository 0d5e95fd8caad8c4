"""All host facts in one frozen value, read through an injectable root.

``inspect_host()`` reads this process's view; ``inspect_host(pid=N)`` reads another process's
container from the host: its /dev/shm through ``/proc/N/root/dev/shm``, its mounts from
``/proc/N/mountinfo``, its cgroup from ``/proc/N/cgroup``, its limits and environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from shmguard.inspect._read import read_text, resolve, under
from shmguard.inspect.cgroup import read_cgroup
from shmguard.inspect.holders import restrict_to_device, scan_holders
from shmguard.inspect.runtime import detect_runtime
from shmguard.inspect.shm import StatvfsFn, read_shm
from shmguard.inspect.system import read_limits, read_meminfo, read_sysv
from shmguard.model import Fact
from shmguard.model.host import CgroupFacts, HoldersScan, HostFacts, Limits, RuntimeFacts, SysvShm

if TYPE_CHECKING:  # imported when read: most runs need neither
    from shmguard.model.host import GpuFacts, TorchFacts


def _environ(root: Path, proc: str) -> tuple[dict[str, str] | None, str | None]:
    """The NUL-separated ``environ`` of ``proc``, or None and the reason."""
    try:
        raw = under(root, f"{proc}/environ").read_bytes()
    except OSError as err:
        return None, f"{proc}/environ: {(err.strerror or str(err)).lower()}"
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env, None


def _same_ipc_ns(root: Path, pid: int) -> tuple[bool | None, str | None]:
    """Whether ``pid`` shares our IPC namespace; None and the reason when it cannot be told."""
    try:
        theirs = os.readlink(under(root, f"/proc/{pid}/ns/ipc"))
        ours = os.readlink(under(root, "/proc/self/ns/ipc"))
    except OSError as err:
        return None, f"/proc/{pid}/ns/ipc: {(err.strerror or str(err)).lower()}"
    return theirs == ours, None


def inspect_host(
    root: Path = Path("/"),
    *,
    pid: int | None = None,
    environ: Mapping[str, str] | None = None,
    statvfs: StatvfsFn | None = None,
    holders: bool = True,
    gpus: bool = True,
    torch: bool = False,
) -> HostFacts:
    """Read every host fact.

    Args:
        root: filesystem root (``/`` live; a fixture tree in tests).
        pid: inspect this process's container instead of our own.
        environ: the target's environment; default ``os.environ`` for ourselves on ``/``,
            else ``root/proc/<pid|self>/environ``.
        statvfs: how to statvfs /dev/shm (default :func:`os.statvfs`).
        holders: scan /proc for processes holding shm files (a few ms per process).
        gpus: query NVML when nvidia-ml-py is installed.
        torch: import torch for its version and sharing strategy (about 1.4 s).

    Returns:
        :class:`HostFacts`. Never raises for unreadable system files: those are unknown facts.
    """
    proc = f"/proc/{pid}" if pid is not None else "/proc/self"
    memory = read_meminfo(root)
    target_root = under(root, f"/proc/{pid}/root") if pid is not None else root
    real = resolve(target_root, "/dev/shm")
    shm = read_shm(
        under(target_root, real),
        read_text(root, f"{proc}/mountinfo"),
        statvfs=statvfs,
        mem_total=memory.total.value,
        within=target_root if pid is not None else None,
        real_path=real,
    )
    own_mountinfo, _ = read_text(root, "/proc/self/mountinfo")
    proc_cgroup, cgroup_reason = read_text(root, f"{proc}/cgroup")
    cgroup: CgroupFacts = read_cgroup(root, own_mountinfo, proc_cgroup)
    unreadable = [cgroup_reason] if cgroup_reason else []
    if environ is None:
        if pid is None and root == Path("/"):
            environ = dict(os.environ)
        else:
            environ, env_reason = _environ(root, proc)
            unreadable += [env_reason] if env_reason else []
    runtime: RuntimeFacts = detect_runtime(target_root, environ, proc_cgroup, tuple(unreadable))
    limits: Limits = read_limits(root, f"{proc}/limits")
    same_ipc, ipc_reason = _same_ipc_ns(root, pid) if pid is not None else (True, None)
    sysv: Fact[SysvShm]
    if same_ipc is None:
        sysv = Fact.unknown(f"cannot tell pid {pid}'s IPC namespace ({ipc_reason})")
    elif not same_ipc:
        sysv = Fact.unknown(
            f"System V segments live in pid {pid}'s IPC namespace; run doctor inside it"
        )
    else:
        sysv = read_sysv(root)
    held: Fact[HoldersScan]
    if not holders:
        held = Fact.unknown("not scanned")
    elif shm.device.value is None:
        held = Fact.unknown(shm.device.reason or "/dev/shm unreadable")
    else:
        # fd and map links name the resolved path (/run/shm/... where /dev/shm -> /run/shm).
        # With a pid, its container's processes (and its pod's), not every host process.
        scan = scan_holders(
            root, shm_prefix=real.rstrip("/") + "/", shm_dir=under(target_root, real), near=pid
        )
        held = Fact.known(restrict_to_device(scan, shm.device.value))
    return HostFacts(
        root=str(root),
        pid=pid,
        shm=shm,
        memory=memory,
        cgroup=cgroup,
        runtime=runtime,
        limits=limits,
        sysv=sysv,
        holders=held,
        gpus=_gpus(root) if gpus else Fact.unknown("not queried"),
        torch=_torch() if torch else Fact.unknown("not requested (use --torch)"),
    )


def _gpus(root: Path) -> Fact[GpuFacts]:
    dev = under(root, "/dev")
    if not os.path.exists(dev / "nvidiactl"):  # the common case: skip importing the module
        return Fact.unknown(f"no NVIDIA driver device ({dev}/nvidiactl missing)")
    from shmguard.inspect.gpu import read_gpus

    return read_gpus(str(dev))


def _torch() -> Fact[TorchFacts]:
    from shmguard.inspect.torchinfo import read_torch

    return read_torch()

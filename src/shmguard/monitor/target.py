"""What ``shmguard watch`` watches: a /dev/shm directory, the processes whose owners count, and
the memory cgroup to read.

* this host: ``/dev/shm``, every process holding a file on that filesystem, the cgroup of
  shmguard itself;
* ``--pid PID``: ``/proc/PID/root/dev/shm`` (the /dev/shm of that process's mount namespace,
  proc(5) ``/proc/pid/root``), PID and its descendants, PID's memory cgroup;
* ``--container-root PATH``: ``PATH/dev/shm`` (a container's root filesystem as seen from the
  host, e.g. ``/proc/<pid>/root`` or a runtime's rootfs), every process holding a file on that
  filesystem, no cgroup.

Owners on a filesystem are told apart by device number (:func:`shmguard.inspect.holders.
restrict_to_device`): the kernel writes every holder's path as ``/dev/shm/...`` whatever its
namespace, so the path alone cannot say whose /dev/shm it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from shmguard.inspect.cgroup import read_cgroup
from shmguard.inspect.holders import restrict_to_device, scan_holders
from shmguard.model.host import HoldersScan


class TargetError(ValueError):
    """The watch target cannot be watched (no such process, no /dev/shm there)."""


@dataclass(frozen=True)
class CgroupMemory:
    """The memory cgroup's figures (cgroup v2 ``memory.max``, ``memory.current``,
    ``memory.stat`` ``shmem``; v1 equivalents; :func:`shmguard.inspect.cgroup.read_cgroup`).

    Attributes:
        dir: the cgroup directory, or None when unknown.
        limit: bytes, or None for no limit or unknown (see ``reason``).
        current: bytes charged now, or None.
        shmem: bytes of tmpfs/shm pages charged to the cgroup, or None.
        reason: why the figures are unknown, else None.
    """

    dir: str | None
    limit: int | None
    current: int | None
    shmem: int | None
    reason: str | None = None


@dataclass(frozen=True)
class WatchTarget:
    """A /dev/shm to watch and whose processes count.

    Attributes:
        shm_path: the directory to statvfs and list.
        label: how reports name it (``/dev/shm``, ``pid 4242``, ``root /x``).
        pid: the process whose tree counts (``--pid``), or None (every holder).
    """

    shm_path: str
    label: str
    pid: int | None = None

    def tree(self) -> list[int]:
        """``pid`` and its descendants (psutil), or [] without a pid or once it is gone."""
        if self.pid is None:
            return []
        import psutil

        try:
            root = psutil.Process(self.pid)
            return [self.pid, *(c.pid for c in root.children(recursive=True))]
        except psutil.Error:
            return []

    def owners(self) -> HoldersScan:
        """Who holds files on this /dev/shm (the tree with ``pid``, else every process),
        restricted to its device; unheld named files are listed too."""
        pids = self.tree() if self.pid is not None else None
        scan = scan_holders(pids=pids, shm_dir=self.shm_path)
        try:
            dev = os.stat(self.shm_path).st_dev
        except OSError:
            return scan
        return restrict_to_device(scan, dev)

    def cgroup(self) -> CgroupMemory:
        """The memory cgroup of ``pid`` (or of this process on the host); unknown with
        ``--container-root``, whose processes are not known."""
        if self.label.startswith("root "):
            return CgroupMemory(None, None, None, None, "no process given (--container-root)")
        pid = "self" if self.pid is None else str(self.pid)
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
            own = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError as err:
            return CgroupMemory(None, None, None, None, f"/proc/{pid}/cgroup: {err.strerror}")
        facts = read_cgroup(Path("/"), mountinfo, own)
        return CgroupMemory(
            dir=facts.memory_dir.value,
            limit=facts.memory_limit.value,
            current=facts.memory_current.value,
            shmem=facts.shmem.value,
            reason=facts.memory_limit.reason,
        )


def resolve_target(pid: int | None = None, container_root: str | None = None) -> WatchTarget:
    """The target for the CLI's options (at most one of them).

    Raises:
        TargetError: both given, no such process, or no /dev/shm directory there.
    """
    if pid is not None and container_root is not None:
        raise TargetError("--pid and --container-root: give one, not both")
    if pid is not None:
        if pid <= 0:
            raise TargetError(f"--pid: not a process id: {pid}")
        if not os.path.exists(f"/proc/{pid}"):
            raise TargetError(f"--pid: no process {pid}")
        target = WatchTarget(f"/proc/{pid}/root/dev/shm", f"pid {pid}", pid)
    elif container_root is not None:
        target = WatchTarget(os.path.join(container_root, "dev/shm"), f"root {container_root}")
    else:
        target = WatchTarget("/dev/shm", "/dev/shm")
    if not os.path.isdir(target.shm_path):
        raise TargetError(f"{target.shm_path}: no such directory")
    return target

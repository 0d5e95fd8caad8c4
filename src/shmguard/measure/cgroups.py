"""Plan the child cgroups a sandbox needs: memory (limit or accounting) and CPU quota.

A plan names directories to create *under the cgroup this process is in* (never the root of a
hierarchy), the files to write there, and where the peak memory is read back. The sandbox
helper (:mod:`shmguard.measure._nsinit`) creates them, moves the command in and removes them.
Everything is read through an injectable ``root`` so cgroup v2 hosts can be tested on fixture
trees.

Sources (kernel Documentation/admin-guide/cgroup-v1/memory.rst and cpu.rst (CFS bandwidth),
cgroup-v2.rst): v1 ``memory.limit_in_bytes``, ``memory.max_usage_in_bytes`` (peak, includes
tmpfs/shmem pages charged to the group), ``cpu.cfs_period_us`` / ``cpu.cfs_quota_us``; v2
``memory.max``, ``memory.peak`` (Linux 5.19+), ``cpu.max`` = ``"$QUOTA $PERIOD"``; a v2
controller is usable in a child only when listed in the parent's ``cgroup.subtree_control``
(the "no internal processes" rule stops us enabling it while the parent holds processes).
Which cgroup this process is in is found by :func:`shmguard.inspect.cgroupfs.locate_cgroup`
(``/proc/self/cgroup`` placed on the cgroupfs mounts of ``/proc/self/mountinfo``).
"""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from shmguard.inspect.cgroupfs import locate_cgroup
from shmguard.units import format_iec

#: CFS period we write with a CPU quota (Docker's default, 100 ms).
CFS_PERIOD_US = 100_000
#: Smallest memory limit accepted, as Docker (moby daemon/daemon_unix.go ``linuxMinMemory``,
#: "Minimum memory limit allowed is 6MB"): below it the command is OOM-killed before it runs.
MIN_MEMORY = 6 * 1024 * 1024
#: Smallest CPU quota accepted, as Docker ("range of CPUs is from 0.01 to N.00").
MIN_CPUS = 0.01


def available_cpus() -> int:
    """CPUs this process may run on (``sched_getaffinity``), the upper bound of ``cpus``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_limits(
    memory_limit: int | None, cpus: float | None, max_cpus: int | None = None
) -> str | None:
    """Why these limits cannot be applied as given (one line), or None when they can.

    Docker's own bounds (moby ``daemon/daemon_unix.go``): memory at least 6 MiB; CPUs from 0.01
    to the number of CPUs available (``max_cpus``; pass :func:`available_cpus` for this host,
    None skips that bound).
    """
    if memory_limit is not None and memory_limit < MIN_MEMORY:
        return f"memory limit must be at least 6 MiB (Docker's minimum), got {memory_limit} bytes"
    if cpus is not None:
        if not math.isfinite(cpus) or cpus < MIN_CPUS:
            return f"cpus must be at least {MIN_CPUS} (Docker's minimum), got {cpus:g}"
        if max_cpus is not None and cpus > max_cpus:
            return (
                f"cpus must be from {MIN_CPUS} to {max_cpus}.00, as there are only {max_cpus} "
                f"CPUs available, got {cpus:g}"
            )
    return None


def shm_beyond_memory(shm_size: int, ram: int | None, swap: int | None = None) -> str | None:
    """Why a tmpfs of ``shm_size`` bytes can never fill on this machine (one clause), or None.

    A tmpfs size is only a cap: nothing is reserved, and the kernel and Docker accept any
    size. But its pages come out of RAM (or swap, when there is some), so above ``ram +
    swap`` bytes (``/proc/meminfo`` MemTotal and SwapTotal) the command runs the machine out
    of memory before /dev/shm fills up: such a run tests memory, not the shm size.
    """
    if ram is None or shm_size <= ram + (swap or 0):
        return None
    memory = f"{format_iec(ram)} of RAM" + (f" and {format_iec(swap)} of swap" if swap else "")
    return (
        f"is more than this machine's {memory}: tmpfs pages come out of memory, so the "
        "command would run out of memory before /dev/shm filled up"
    )


@dataclass(frozen=True)
class CgroupDir:
    """One child cgroup to create.

    Attributes:
        controller: ``memory`` or ``cpu``.
        version: 1 or 2.
        dir: absolute path of the directory to create (as seen from ``/``).
        writes: ``(file, value)`` pairs written after ``mkdir``, in order.
        procs: the file a process writes ``0`` to, to join (``cgroup.procs``).
        peak: file holding peak memory bytes (v2 ``memory.peak`` exists from Linux 5.19; when
            it is missing the peak is reported unknown), or None for CPU.
        usage: file holding current memory bytes, or None.
        events: file with an ``oom_kill N`` line counting the memory cgroup's OOM kills (v1
            ``memory.oom_control``, Linux 4.13+; v2 ``memory.events``), or None.
    """

    controller: str
    version: int
    dir: str
    writes: tuple[tuple[str, str], ...] = ()
    procs: str = "cgroup.procs"
    peak: str | None = None
    usage: str | None = None
    events: str | None = None


@dataclass(frozen=True)
class CgroupPlan:
    """The cgroups to create, and for each wanted controller that cannot be had, why.

    ``unavailable`` maps ``memory``/``cpu`` to a one-line reason naming the file or rule.
    """

    dirs: tuple[CgroupDir, ...] = ()
    unavailable: dict[str, str] = field(default_factory=dict)

    def get(self, controller: str) -> CgroupDir | None:
        """The planned directory for ``controller``, or None."""
        return next((d for d in self.dirs if d.controller == controller), None)


@dataclass(frozen=True)
class _Own:
    """This process's ``/proc/self/mountinfo`` and ``/proc/self/cgroup`` texts below ``root``,
    read once per plan, or why they could not be read."""

    root: Path
    mountinfo: str | None
    cgroup: str | None
    unreadable: str

    @classmethod
    def read(cls, root: Path) -> _Own:
        texts: list[str | None] = []
        reasons: list[str] = []
        for name in ("mountinfo", "cgroup"):
            try:
                # Paths are bytes to the kernel: keep any non-UTF-8 byte as os.fsdecode would.
                path = root / "proc/self" / name
                texts.append(path.read_text(encoding="utf-8", errors="surrogateescape"))
            except OSError as err:
                texts.append(None)
                reasons.append(f"/proc/self/{name}: {err.strerror or err}")
        return cls(root, texts[0], texts[1], "; ".join(reasons))

    def locate(self, controller: str | None) -> tuple[Path | None, str]:
        """Where this process's cgroup is (v2 for None, else the v1 ``controller``) below
        ``root``, or why not. A cgroup outside the mount's root is refused: the sandbox nests
        only under its own cgroup, never beside it."""
        if self.mountinfo is None or self.cgroup is None:
            return None, self.unreadable
        found = locate_cgroup(self.root, self.mountinfo, self.cgroup, controller)
        if found.value is None:
            return None, found.reason or ""
        if found.value.note is not None:
            return None, f"{found.value.note} ({found.value.mount.mount_point})"
        return found.value.path, ""


def _v2_dir(own: _Own, controller: str) -> tuple[Path | None, str]:
    base, reason = own.locate(None)
    if base is None:
        return None, reason
    try:
        enabled = (base / "cgroup.subtree_control").read_text().split()
    except OSError as err:
        return None, f"{base}/cgroup.subtree_control: {err.strerror}"
    if controller not in enabled:
        return None, (
            f"cgroup v2: the {controller} controller is not enabled for children of {base} "
            "(cgroup.subtree_control), and a cgroup holding processes cannot enable it"
        )
    return base, ""


def _parent_dir(own: _Own, controller: str) -> tuple[Path | None, int, str]:
    reasons = []
    for version in (2, 1):
        base, reason = _v2_dir(own, controller) if version == 2 else own.locate(controller)
        if base is not None:
            if not os.access(base, os.W_OK):
                reasons.append(f"{base} is not writable (needs root or a delegated cgroup)")
                continue
            return base, version, ""
        reasons.append(reason)
    return None, 0, "; ".join(dict.fromkeys(r for r in reasons if r))


def plan_cgroups(
    memory_limit: int | None = None,
    cpus: float | None = None,
    account_memory: bool = False,
    root: Path = Path("/"),
    token: str | None = None,
) -> CgroupPlan:
    """Plan child cgroups for a sandbox.

    Args:
        memory_limit: bytes for the memory limit, or None.
        cpus: CPU quota in CPUs (``1.5`` = 150 ms per 100 ms period), or None.
        account_memory: create a memory cgroup without a limit, only to read the peak.
        root: filesystem root whose ``proc/self/{cgroup,mountinfo}`` and cgroup mounts are read.
        token: suffix of the directory names (``shmguard-<token>``); random by default.

    Returns:
        a :class:`CgroupPlan`; nothing is created here.

    Raises:
        ValueError: for limits outside Docker's bounds (:func:`check_limits`).
    """
    problem = check_limits(memory_limit, cpus)
    if problem is not None:
        raise ValueError(problem)
    name = f"shmguard-{token or secrets.token_hex(6)}"
    dirs: list[CgroupDir] = []
    unavailable: dict[str, str] = {}
    own = _Own.read(root)
    if memory_limit is not None or account_memory:
        base, version, reason = _parent_dir(own, "memory")
        if base is None:
            unavailable["memory"] = reason
        elif version == 2:
            writes = (("memory.max", str(memory_limit)),) if memory_limit else ()
            dirs.append(
                CgroupDir(
                    "memory",
                    2,
                    str(base / name),
                    writes,
                    peak="memory.peak",
                    usage="memory.current",
                    events="memory.events",
                )
            )
        else:
            writes = (("memory.limit_in_bytes", str(memory_limit)),) if memory_limit else ()
            dirs.append(
                CgroupDir(
                    "memory",
                    1,
                    str(base / name),
                    writes,
                    peak="memory.max_usage_in_bytes",
                    usage="memory.usage_in_bytes",
                    events="memory.oom_control",
                )
            )
    if cpus is not None:
        base, version, reason = _parent_dir(own, "cpu")
        quota = max(1000, round(cpus * CFS_PERIOD_US))
        if base is None:
            unavailable["cpu"] = reason
        elif version == 2:
            dirs.append(
                CgroupDir("cpu", 2, str(base / name), (("cpu.max", f"{quota} {CFS_PERIOD_US}"),))
            )
        else:
            cfs = (("cpu.cfs_period_us", str(CFS_PERIOD_US)), ("cpu.cfs_quota_us", str(quota)))
            dirs.append(CgroupDir("cpu", 1, str(base / name), cfs))
    return CgroupPlan(tuple(dirs), unavailable)

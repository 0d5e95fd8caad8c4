"""Host fact values: what ``inspect`` reads about /dev/shm, the memory cgroup, the runtime,
limits, shm holders, GPUs and torch (frozen dataclasses).

Rules take these values (:mod:`shmguard.lint`), never the host itself: :mod:`shmguard.inspect`
produces them through an injectable root, and a fixture tree or a JSON snapshot can stand in for
a machine. Every fact that could not be read is a :class:`~shmguard.model.Fact` with its reason.
Sources of each fact are in the reading functions' docstrings (``shmguard.inspect.*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shmguard.model.fact import Fact


@dataclass(frozen=True)
class LeftoverFile:
    """A named ``torch_*`` file with zero allocated blocks: the trace of a failed allocation.
    ``requested`` is its ``st_size`` (what torch asked for), in bytes."""

    name: str
    requested: int


@dataclass(frozen=True)
class ShmFacts:
    """What /dev/shm is, for the process inspected.

    Attributes:
        path: ``/dev/shm`` as the target sees it.
        real_path: ``path`` with symlinks resolved in the target (``/run/shm`` where
            ``/dev/shm -> /run/shm``); the mount is looked up for this path.
        exists: whether the directory exists; unknown when it cannot be looked at (another
            process's ``/proc/<pid>/root`` may be unreadable even to root).
        mount_point: the mount it lives on (``/dev/shm`` itself when mounted there; ``/dev``
            or ``/`` when it is a plain directory).
        fstype: ``tmpfs``, ``ramfs``, ``ext4``... (mountinfo field 9).
        source: the mount source (``shm`` for Docker, ``tmpfs``...).
        options: the filesystem's super options (``rw,size=65536k``).
        size_option: bytes from ``size=`` (0 = unlimited), or a known None when absent.
        sizing: ``size-option``, ``kernel-default`` (tmpfs without ``size=``: half of RAM),
            ``unlimited`` (``size=0``) or ``not-tmpfs``.
        total, used, free: statvfs bytes: ``f_blocks``, ``f_blocks - f_bfree``, ``f_bavail``
            times ``f_frsize``. Counts unlinked-but-held files too. Unknown when statvfs
            reports 0 blocks: ramfs and a tmpfs with ``size=0`` keep no block counts
            (mm/shmem.c ``shmem_statfs``, fs/ramfs ``simple_statfs``), so 0 is not a size.
        default_of: the runtimes whose default size equals ``total`` (empty when none).
            Equal size is all it says: the size may have been set on purpose.
        named_files, named_bytes: visible regular files at the top level and their allocated
            bytes (``st_blocks * 512``); ``used - named_bytes`` is held by unlinked files.
        leftovers: zero-block ``torch_*`` files.
        device: ``st_dev`` of the directory, to match holders' files.
    """

    path: str
    real_path: str
    exists: Fact[bool]
    mount_point: Fact[str]
    fstype: Fact[str]
    source: Fact[str]
    options: Fact[tuple[str, ...]]
    size_option: Fact[int]
    sizing: Fact[str]
    total: Fact[int]
    used: Fact[int]
    free: Fact[int]
    default_of: Fact[tuple[str, ...]]
    named_files: Fact[int]
    named_bytes: Fact[int]
    leftovers: Fact[tuple[LeftoverFile, ...]]
    device: Fact[int]


@dataclass(frozen=True)
class CgroupFacts:
    """Limits of the cgroup the inspected process is in.

    Attributes:
        version: 1 or 2: the hierarchy that holds the memory controller.
        mode: ``v1``, ``v2``, ``hybrid`` (v1 controllers plus a cgroup2 mount) or ``none``.
        memory_dir: the memory cgroup directory read, as the target names it.
        memory_limit: bytes, or a known None for no limit (v1 takes the hierarchical limit).
        memory_current: bytes charged now (``memory.current`` / ``memory.usage_in_bytes``).
        shmem: bytes of tmpfs/shm pages charged to this cgroup (``memory.stat``).
        swap_limit: bytes of swap allowed (v2 ``memory.swap.max``; v1
            ``memory.memsw.limit_in_bytes`` minus the memory limit), None for no limit.
        oom_kills: OOM kills recorded in this cgroup.
        cpu_quota: CPUs the CFS quota allows (``quota / period``), None for no quota.
        cpuset: CPUs in the cpuset (count), from ``cpuset.cpus.effective`` or v1
            ``cpuset.effective_cpus``/``cpuset.cpus``.
        notes: honest remarks, e.g. that a cgroup2 mount has no memory controller.
    """

    version: Fact[int]
    mode: str
    memory_dir: Fact[str]
    memory_limit: Fact[int]
    memory_current: Fact[int]
    shmem: Fact[int]
    swap_limit: Fact[int]
    oom_kills: Fact[int]
    cpu_quota: Fact[float]
    cpuset: Fact[int]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class RuntimeFacts:
    """``name`` is one of kubernetes, podman, docker, apptainer, slurm, none or unknown;
    ``evidence`` lists every marker seen (``"/.dockerenv exists"``, ``"env
    KUBERNETES_SERVICE_HOST"``) and every place that could not be read (``"could not read
    /proc/1/environ: permission denied"``). ``unknown`` means no marker was seen but some place
    could not be looked at, so ``none`` would be a guess."""

    name: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class MemInfo:
    """/proc/meminfo figures in bytes. ``shmem`` is all tmpfs/shm pages on the host."""

    total: Fact[int]
    available: Fact[int]
    swap_total: Fact[int]
    swap_free: Fact[int]
    shmem: Fact[int]


@dataclass(frozen=True)
class Limits:
    """Resource limits of the inspected process; a known None means unlimited.

    ``nofile_*`` is a count of descriptors; ``memlock_*`` bytes.
    """

    nofile_soft: Fact[int]
    nofile_hard: Fact[int]
    memlock_soft: Fact[int]
    memlock_hard: Fact[int]


@dataclass(frozen=True)
class SysvShm:
    """System V shared memory segments visible in this IPC namespace: count, total ``size``
    bytes, and how many have no process attached (``nattch`` 0)."""

    segments: int
    bytes: int
    unattached: int


@dataclass(frozen=True)
class ShmFile:
    """One /dev/shm file a process holds.

    Attributes:
        path: the path as the kernel shows it, without the `` (deleted)`` suffix.
        inode: ``st_ino`` of the file.
        bytes: ``st_blocks * 512``: pages really allocated (a sparse or failed allocation
            shows 0 here even when ``st_size`` is large; torch_shm.md section 1.2).
        deleted: True when the name was unlinked (the kernel's `` (deleted)`` marker).
        kind: :func:`classify_shm_name` of the path.
        via: ``"fd"`` (an open descriptor), ``"map"`` (only a mapping) or ``"name"`` (a named
            file no scanned process holds, found by listing the directory).
        device: ``st_dev`` of the tmpfs, so files of different containers never merge.
    """

    path: str
    inode: int
    bytes: int
    deleted: bool
    kind: str
    via: str
    device: int = 0


@dataclass(frozen=True)
class ProcessHolding:
    """The shm files one process holds. ``bytes`` sums its files, each inode once."""

    pid: int
    name: str
    files: tuple[ShmFile, ...]
    bytes: int


@dataclass(frozen=True)
class HoldersScan:
    """The result of :func:`scan_holders`.

    Attributes:
        processes: processes holding at least one shm file, by pid.
        by_kind: bytes per owner kind (every kind of :data:`KINDS` present, 0 when none),
            each inode counted once across all processes.
        total_bytes: bytes of all unique inodes held (the part of statvfs "used" that some
            process is keeping alive).
        errors: one line per entry that could not be read, e.g. ``"pid 123: permission
            denied"``; never raised.
        unheld: named files in the listed /dev/shm directory that no scanned process holds,
            with blocks allocated (PyTorch's ``file_system`` strategy keeps queued batches as
            named files until the consumer takes them; a crashed job's segments stay too).
            Counted in ``by_kind`` and ``total_bytes``. Zero-block names (failed allocations)
            are left out.
    """

    processes: tuple[ProcessHolding, ...]
    by_kind: Mapping[str, int]
    total_bytes: int
    errors: tuple[str, ...]
    unheld: tuple[ShmFile, ...] = ()


@dataclass(frozen=True)
class Gpu:
    """One GPU: ``memory_total`` in bytes (``nvmlDeviceGetMemoryInfo().total``)."""

    index: int
    name: str
    memory_total: int


@dataclass(frozen=True)
class GpuFacts:
    """NVIDIA driver version and the GPUs NVML sees."""

    driver: str
    gpus: tuple[Gpu, ...]


@dataclass(frozen=True)
class TorchFacts:
    """``sharing_strategy`` is ``torch.multiprocessing.get_sharing_strategy()`` in this
    interpreter (``file_descriptor`` by default on Linux: shm files are unlinked at once and
    held through fds; ``file_system`` keeps names in /dev/shm). ``strategies`` lists the
    available ones."""

    version: str
    sharing_strategy: str
    strategies: tuple[str, ...]


@dataclass(frozen=True)
class HostFacts:
    """Everything doctor's rules look at. ``root`` is the filesystem root read (``/`` live);
    ``pid`` the inspected process (None: this one)."""

    root: str
    pid: int | None
    shm: ShmFacts
    memory: MemInfo
    cgroup: CgroupFacts
    runtime: RuntimeFacts
    limits: Limits
    sysv: Fact[SysvShm]
    holders: Fact[HoldersScan]
    gpus: Fact[GpuFacts]
    torch: Fact[TorchFacts]

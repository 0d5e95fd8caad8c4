"""What the one sampler (:mod:`shmguard.measure.sampler`) hands back: typed, frozen values.

:class:`OwnerSnapshot` is one slow-loop observation, :class:`Reading` one live look at the
running sampler (what a long-running watcher reads every second), :class:`Timeline` the whole
record at :meth:`~shmguard.measure.sampler.ShmSampler.stop`. :func:`shm_usage` is the statvfs
arithmetic they all rest on (``df``'s "used": ``(f_blocks - f_bfree) * f_frsize``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class OwnerSnapshot:
    """One slow-loop observation.

    Attributes:
        t: seconds since the sampler started.
        shm_used: statvfs used bytes read right before the scan.
        by_kind: bytes per owner kind (:data:`shmguard.inspect.holders.KINDS`) of the files
            the process tree holds, each inode once.
        held_bytes: sum of ``by_kind``.
        processes: number of processes in the tree.
        rss: sum of the tree's RSS in bytes (mapped shm is counted in every process that maps
            it, so this overstates memory; the cgroup figure does not).
        memory_usage: the memory cgroup's current usage in bytes, or None.
        cpu_seconds: user+system CPU seconds of the tree so far.
    """

    t: float
    shm_used: int
    by_kind: Mapping[str, int]
    held_bytes: int
    processes: int
    rss: int
    memory_usage: int | None
    cpu_seconds: float


@dataclass(frozen=True)
class Timeline:
    """What the sampler saw.

    Attributes:
        path: the statvfs path.
        interval: requested seconds between polls.
        shm_total: size of the filesystem in bytes.
        baseline: used bytes at the first poll.
        peak: highest used bytes seen.
        peak_t: seconds after start when ``peak`` was first seen.
        samples: ``(t, used)`` change points, the first and last poll included (at most the
            sampler's ``max_points``: the first ones, or with ``ring`` the most recent ones).
        n_samples: number of polls.
        mean_interval: achieved mean seconds between polls.
        max_gap: longest seconds between two polls.
        realtime: whether the fast loop ran SCHED_FIFO.
        owners: slow-loop snapshots in time order.
        errors: distinct problems met (unreadable paths, scan errors), one line each.
        torch_largest: bytes of the largest single PyTorch shm block (``torch_*``) the owner
            scans saw: a DataLoader's collated batch tensor (0 when none was seen).
        torch_creators: how many processes created ``torch_*`` blocks (the pid in
            ``torch_<pid>_<random>_<n>`` is the allocating process: with a DataLoader, its
            workers).
        dropped_points: change points not kept in ``samples`` (past ``max_points``).
    """

    path: str
    interval: float
    shm_total: int
    baseline: int
    peak: int
    peak_t: float
    samples: tuple[tuple[float, int], ...]
    n_samples: int
    mean_interval: float
    max_gap: float
    realtime: bool
    owners: tuple[OwnerSnapshot, ...] = ()
    errors: tuple[str, ...] = field(default=())
    torch_largest: int = 0
    torch_creators: int = 0
    dropped_points: int = 0

    @property
    def rss_peak(self) -> int | None:
        """Highest tree RSS seen by the slow loop, or None without snapshots."""
        return max((o.rss for o in self.owners), default=None)

    def owners_at_peak(self) -> OwnerSnapshot | None:
        """The snapshot that saw the most shm used (ties: the one nearest ``peak_t``)."""
        if not self.owners:
            return None
        return max(self.owners, key=lambda o: (o.shm_used, -abs(o.t - self.peak_t)))

    def max_step(self) -> int:
        """Largest single increase between consecutive change points (about one batch)."""
        best = 0
        for (_, a), (_, b) in zip(self.samples, self.samples[1:], strict=False):
            best = max(best, b - a)
        return best


@dataclass(frozen=True)
class Reading:
    """One live look at a running sampler (:meth:`ShmSampler.reading`).

    Attributes:
        t: seconds since the sampler started.
        used: bytes used at the latest poll.
        total: the filesystem's size in bytes.
        peak: the highest used bytes seen.
        since_change: seconds since ``used`` last changed.
        n_samples: polls so far.
        owner: the latest slow-loop snapshot, or None.
        errors: distinct problems met so far, one line each.
    """

    t: float
    used: int
    total: int
    peak: int
    since_change: float
    n_samples: int
    owner: OwnerSnapshot | None = None
    errors: tuple[str, ...] = ()

    @property
    def free(self) -> int:
        """``total - used`` in bytes (0 at least)."""
        return max(self.total - self.used, 0)

    @property
    def used_fraction(self) -> float:
        """``used / total`` (0.0 for a size of 0)."""
        return self.used / self.total if self.total > 0 else 0.0


def shm_usage(path: Path | str) -> tuple[int, int]:
    """``(used, total)`` bytes of the filesystem holding ``path``, as ``df`` computes them.

    Raises:
        OSError: from ``statvfs`` (e.g. the namespace is gone).
    """
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize

"""``shmguard watch``: /dev/shm over time, its owners, the memory cgroup, the threshold and the
stall verdict, one :class:`WatchSnapshot` per refresh. The library never prints; the CLI renders
the snapshots (:mod:`shmguard.render.watch_text`) and runs the alert command.

The parts are the project's single ones: :meth:`ShmSampler.watcher
<shmguard.measure.sampler.ShmSampler.watcher>` polls statvfs between refreshes (a spike shorter
than the refresh is still seen: the alert uses the highest use since the last refresh),
:class:`~shmguard.measure.owners.OwnerTracker` scans owners and sums the process tree's CPU time
once per refresh, :class:`~shmguard.measure.stall.StallObserver` keeps the CPU mark and lists
the failed allocations, :func:`~shmguard.triage.stall.stall_verdict` judges a stall from the same
three observations ``run --watch`` gives it (near full, failed allocations = zero-block
``torch_*`` files, no progress = used bytes unchanged and the CPU flat), and the fix's size is
:func:`~shmguard.measure.watched.model_size` (the DataLoader model for the workers and batch
bytes the torch blocks showed) through the sizing policy.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from shmguard.estimate.policy import ALERT_PERCENT, Policy, Sized
from shmguard.measure.owners import OwnerTracker
from shmguard.measure.sampler import ShmSampler
from shmguard.measure.stall import StallObserver
from shmguard.measure.watched import model_size
from shmguard.model.host import HoldersScan
from shmguard.monitor.target import CgroupMemory, WatchTarget
from shmguard.triage.stall import ShmObservation, StallVerdict, stall_verdict

#: statvfs period between refreshes (inotify wakes it early on writes; 10 Hz keeps the cost
#: of a days-long watch small).
POLL_INTERVAL = 0.1
#: Default seconds of "near full, failed allocations, no progress" that make a stall.
STALL_AFTER = 10.0
#: Refreshes of history kept for the sparkline and the JSON ``history``.
HISTORY = 60
#: The headline of a stall, as reports print it.
STALLED = "stalled: DataLoader blocked on /dev/shm"
_PID = re.compile(r"torch_(\d+)_")


@dataclass(frozen=True)
class WatchSnapshot:
    """One refresh of ``shmguard watch``.

    Attributes:
        t: seconds since watching began.
        target: what is watched (``/dev/shm``, ``pid N``, ``root PATH``).
        path: the /dev/shm directory.
        total: its size in bytes.
        used: bytes used now (statvfs, as ``df``).
        free: ``total - used``.
        peak: the highest used bytes since watching began.
        window_peak: the highest used bytes since the previous refresh (what the alert uses).
        threshold: the alert fraction of ``total`` (0.8 = 80%).
        alert: ``window_peak`` reached ``threshold`` of ``total``.
        owners: bytes per owner kind (torch, nccl, psm, plasma, semaphore, other).
        processes: processes counted (the tree with ``--pid``, else the holders).
        cpu_seconds: their user+system CPU seconds so far.
        cgroup: the memory cgroup's limit, usage and shmem.
        failed_allocations: ``(name, bytes asked for)`` of each zero-block ``torch_*`` file.
        quiet: seconds without progress (no change in used bytes, CPU flat).
        stall: the stall verdict.
        fix_size: the /dev/shm size the fix gives (the DataLoader model when torch blocks were
            seen), or None.
        history: used bytes at each of the last refreshes, oldest first.
        errors: problems met (unreadable entries), one line each.
    """

    t: float
    target: str
    path: str
    total: int
    used: int
    free: int
    peak: int
    window_peak: int
    threshold: float
    alert: bool
    owners: Mapping[str, int]
    processes: int
    cpu_seconds: float
    cgroup: CgroupMemory
    failed_allocations: tuple[tuple[str, int], ...]
    quiet: float
    stall: StallVerdict
    fix_size: Sized | None
    history: tuple[int, ...]
    errors: tuple[str, ...]

    @property
    def used_fraction(self) -> float:
        """``used / total`` (0.0 for a size of 0)."""
        return self.used / self.total if self.total > 0 else 0.0

    @property
    def stalled(self) -> bool:
        """The stall verdict fired."""
        return self.stall.stalled


class _Holders:
    """Adapts a :class:`WatchTarget` to :class:`OwnerTracker`: one scan per snapshot, whose
    processes are the ones counted when no pid is given."""

    def __init__(self, target: WatchTarget) -> None:
        self.target = target
        self.last: HoldersScan | None = None

    def pids(self) -> list[int]:
        scan = self.last = self.target.owners()
        if self.target.pid is not None:
            return self.target.tree()
        return [p.pid for p in scan.processes]

    def scan(self, pids: list[int]) -> HoldersScan | None:
        return self.last


class Monitor:
    """Watches one :class:`WatchTarget`; call :meth:`snapshot` once per refresh.

    Args:
        target: what to watch.
        threshold: alert fraction of the size, in (0, 1].
        stall_after: seconds of no progress (with near full and failed allocations) that make
            a stall.
        poll: statvfs period between refreshes in seconds.
        policy: the sizing policy of the fix.
        history: refreshes kept for the sparkline.

    Use as a context manager (starts and stops the sampler).

    Raises:
        ValueError: a threshold outside (0, 1] or a negative ``stall_after``.
        OSError: from the first statvfs (the directory went away).
    """

    def __init__(
        self,
        target: WatchTarget,
        threshold: float = ALERT_PERCENT / 100,
        stall_after: float = STALL_AFTER,
        poll: float = POLL_INTERVAL,
        policy: Policy | None = None,
        history: int = HISTORY,
    ) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if stall_after < 0:
            raise ValueError(f"negative stall time: {stall_after}")
        self.target = target
        self.threshold = threshold
        self.stall_after = stall_after
        self.policy = policy
        self.sampler = ShmSampler.watcher(target.shm_path, interval=poll)
        self._holders = _Holders(target)
        self._errors: dict[str, None] = {}
        self._tracker = OwnerTracker(self._holders.pids, self._holders.scan, None, self._errors)
        self._history: deque[int] = deque(maxlen=history)
        self._last = 0.0
        # No baseline: attached to a running job, every failed allocation's file counts.
        self._observer = StallObserver(target.shm_path)

    def __enter__(self) -> Monitor:
        self.sampler.start()
        self._last = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.cancel(wait=1.0)

    def snapshot(self) -> WatchSnapshot:
        """What is true now; the alert looks at the highest use since the previous call."""
        now = time.monotonic()
        s = self.sampler
        window = s.recent(now - self._last)
        self._last = now
        reading = s.reading()
        used, total = reading.used, reading.total
        window_peak = max([used, *(u for _, u in window)])
        owner = self._tracker.snapshot(reading.t, used)
        # No progress: used bytes unchanged and the tree's CPU flat (the stall observer's
        # test, HangDetector's), measured from the first refresh that saw it flat.
        flat = self._observer.cpu_flat(now, owner.cpu_seconds)
        quiet = min(reading.since_change, 0.0 if flat is None else flat)
        failed = self._observer.failed()
        largest_failed = max((n for _, n in failed), default=0)
        obs = ShmObservation(
            used=used,
            total=total,
            peak=reading.peak,
            margin=largest_failed,
            failed_blocks=len(failed),
            quiet=quiet,
            sees_output=False,
        )
        verdict = stall_verdict(obs, self.stall_after)
        self._history.append(window_peak)
        fix = self._fix_size(failed, reading.peak) if verdict.full else None
        return WatchSnapshot(
            t=reading.t,
            target=self.target.label,
            path=self.target.shm_path,
            total=total,
            used=used,
            free=max(total - used, 0),
            peak=reading.peak,
            window_peak=window_peak,
            threshold=self.threshold,
            alert=total > 0 and window_peak >= self.threshold * total,
            owners=dict(owner.by_kind),
            processes=owner.processes,
            cpu_seconds=owner.cpu_seconds,
            cgroup=self.target.cgroup(),
            failed_allocations=failed,
            quiet=quiet,
            stall=verdict,
            fix_size=fix,
            history=tuple(self._history),
            errors=(*reading.errors, *self._errors),
        )

    def _fix_size(self, failed: tuple[tuple[str, int], ...], peak: int) -> Sized | None:
        """The DataLoader model's size for the workers and batch bytes seen: the torch blocks
        the owner scans saw plus the failed allocations' files (their names carry the worker's
        pid, their size the bytes asked for), as ``run --watch`` sizes it."""
        creators, largest = self._tracker.torch_seen()
        pids = {m.group(1) for name, _ in failed if (m := _PID.match(name))}
        largest = max([largest, *(n for _, n in failed)])
        return model_size(len(creators | pids), largest, peak, self.policy)

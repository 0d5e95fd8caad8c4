"""The one /dev/shm sampler (measure, probe, and later the guard, the entrypoint and the monitor).

Two threads:

* the **fast loop** calls ``statvfs`` on a /dev/shm path at a fixed interval and keeps the
  points where "used" changed, the peak and when it happened. statvfs is the only counter that
  sees PyTorch's default ``file_descriptor`` strategy (its files are unlinked at once, so
  ``ls``/``du`` see nothing); for another mount namespace the path is
  ``/proc/<pid>/root/dev/shm`` (torch_shm.md, sections 1.2 and "Monitor: what to sample").
  Used = ``(f_blocks - f_bfree) * f_frsize``, what ``df`` shows. The extra-batch spikes last
  about 1 ms, so measure/probe use 2 ms; long-running watchers use 10 ms or more. The thread
  asks for SCHED_FIFO (root only) so busy DataLoader workers on few cores cannot starve it; it
  sleeps between polls, so that costs next to nothing. Between polls it also waits on inotify
  (:mod:`shmguard.measure._inotify`): a write or ``fallocate`` to a file in the directory
  triggers an extra poll at once, so an allocation freed within one interval is still seen.
* the **slow loop** (optional) attributes the space to owner kinds with
  :func:`shmguard.inspect.holders.scan_holders` over the given process tree, sums the tree's
  RSS and CPU time (psutil) and reads the memory cgroup's current usage.

The library never prints; callers read :meth:`ShmSampler.stop`'s :class:`Timeline`.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shmguard.measure._inotify import Waker, open_waker
from shmguard.measure._threads import start_thread

#: Keep at most this many change points (about 3 MB of tuples); later points are thinned.
MAX_POINTS = 200_000
#: PyTorch's shm block names: ``/torch_<pid>_<random>_<counter>`` (at::MapAllocator;
#: docs/background.md).
#: At most this many extra polls on inotify events between two clock polls: a stream of small
#: writes must not turn the fast loop into a busy poll.
EVENT_POLLS = 8
_TORCH_NAME = re.compile(r"/torch_(\d+)_\d+_\d+$")


@dataclass(frozen=True)
class OwnerSnapshot:
    """One slow-loop observation.

    Attributes:
        t: seconds since the sampler started.
        shm_used: statvfs used bytes read right before the scan.
        by_kind: bytes per owner kind (torch, nccl, psm, plasma, semaphore, other) of the files
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
        samples: ``(t, used)`` change points, the first and last poll included.
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


def shm_usage(path: Path | str) -> tuple[int, int]:
    """``(used, total)`` bytes of the filesystem holding ``path``, as ``df`` computes them.

    Raises:
        OSError: from ``statvfs`` (e.g. the namespace is gone).
    """
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize


class ShmSampler:
    """Poll a /dev/shm path from a thread; optionally attribute owners from a second thread.

    Args:
        path: the /dev/shm to watch (``/proc/<pid>/root/dev/shm`` for a sandbox).
        interval: seconds between statvfs polls (0.002 for measure/probe, >= 0.01 for
            watchers).
        pids: returns the PIDs of the process tree to attribute; None disables the slow loop
            unless ``usage_file`` is given.
        owner_interval: seconds between slow-loop snapshots.
        usage_file: a memory cgroup's current-usage file, read by the slow loop.
        realtime: ask for SCHED_FIFO priority 10 for the fast loop (ignored when not allowed).
        scan: the holders scan to use (default :func:`shmguard.inspect.holders.scan_holders`).
        events: also poll when inotify reports a write to a file in ``path`` (at most one
            extra polls per interval, :data:`EVENT_POLLS`); False polls on the clock only.
        fast_switch: lower the interpreter's thread switch interval to 0.5 ms while running
            (measure, probe: a 2 ms loop must not wait 5 ms for the GIL). A watcher living in
            the user's own process at 10 ms or more (the PyTorch guard) passes False, so the
            process's threads keep their usual switch interval.
    """

    def __init__(
        self,
        path: Path | str,
        interval: float = 0.002,
        pids: Callable[[], list[int]] | None = None,
        owner_interval: float = 0.1,
        usage_file: Path | None = None,
        realtime: bool = True,
        scan: Callable[..., Any] | None = None,
        events: bool = True,
        fast_switch: bool = True,
    ) -> None:
        if interval <= 0 or owner_interval <= 0:
            raise ValueError("sampling intervals must be > 0")
        self.path = str(path)
        self.interval = interval
        self.pids = pids
        self.owner_interval = owner_interval
        self.usage_file = usage_file
        self.realtime_wanted = realtime
        self._scan = scan
        self.events = events
        self.fast_switch = fast_switch
        self._waker: Waker | None = None
        self._wake: Waker | None = None  # the same waker, kept for cancel() to wake
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._points: list[tuple[float, int]] = []
        self._owners: list[OwnerSnapshot] = []
        self._errors: dict[str, None] = {}
        self._t0 = 0.0
        self._n = 0
        self._max_gap = 0.0
        self._last_t = 0.0
        self._total = 0
        self._baseline = 0
        self._peak = 0
        self._peak_t = 0.0
        self._realtime = False
        self._used = 0
        self._last_change = 0.0
        self._procs: dict[int, Any] = {}
        self._cpu_done = 0.0
        self._switch = 0.005
        self._cpu_last: dict[int, float] = {}
        self._torch_largest = 0
        self._torch_creators: set[str] = set()

    # --------------------------------------------------------------- live values

    @property
    def used(self) -> int:
        """Latest used bytes."""
        return self._used

    @property
    def total(self) -> int:
        """Filesystem size in bytes (0 before the first poll)."""
        return self._total

    @property
    def peak(self) -> int:
        """Highest used bytes so far."""
        return self._peak

    def since_change(self) -> float:
        """Seconds since "used" last changed."""
        return time.monotonic() - self._last_change

    def torch_seen(self) -> tuple[frozenset[str], int]:
        """``(creators, largest)`` so far: the pids (as in the names) of the processes that
        created ``torch_*`` blocks and the bytes of the largest block (see :class:`Timeline`);
        (empty, 0) before any was seen."""
        return frozenset(self._torch_creators), self._torch_largest

    def since_peak(self) -> float:
        """Seconds since the peak was last raised."""
        return time.monotonic() - self._peak_t

    def latest_owner(self) -> OwnerSnapshot | None:
        """The most recent slow-loop snapshot."""
        with self._lock:
            return self._owners[-1] if self._owners else None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Take the first poll (raising OSError if the path cannot be read) and start."""
        used, total = shm_usage(self.path)
        if self.pids is not None or self.usage_file is not None:
            # Import here, not in the slow thread: an import holds the GIL for tens of ms,
            # which would open a gap in the fast loop.
            import psutil  # noqa: F401

            if self._scan is None and self.pids is not None:
                from shmguard.inspect.holders import scan_holders

                self._scan = functools.partial(scan_holders, shm_dir=self.path)
        now = time.monotonic()
        self._t0 = self._last_t = self._last_change = self._peak_t = now
        self._total, self._baseline, self._peak, self._used = total, used, used, used
        self._points = [(0.0, used)]
        self._n = 1
        # A 5 ms GIL switch interval would let the slow loop hold the fast one off for longer
        # than a spike lasts; 0.5 ms keeps the worst gap near the poll interval.
        self._switch = sys.getswitchinterval()
        if self.fast_switch:
            sys.setswitchinterval(min(self._switch, 0.0005))
        # The watch is set before start() returns, so nothing the caller starts next is missed.
        self._waker = self._wake = open_waker(self.path) if self.events else None
        self._threads.append(start_thread(self._fast, name="shm-sampler"))
        if self.pids is not None or self.usage_file is not None:
            self._threads.append(start_thread(self._slow, name="shm-owners"))

    def cancel(self, wait: float = 0.0) -> None:
        """Tell both loops to end at their next wake (within one ``interval``) and wait up to
        ``wait`` seconds for them, without building a :class:`Timeline`: for a watcher that
        only read the live values, such as the PyTorch guard at the end of each epoch."""
        self._stop.set()
        if self._wake is not None:
            self._wake.wake()  # out of its select() now, not at the end of the interval
        for t in self._threads:
            t.join(timeout=wait)
        self._threads = []
        if self.fast_switch:
            sys.setswitchinterval(self._switch)

    def stop(self) -> Timeline:
        """Stop both loops and return what they saw."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        if self.fast_switch:
            sys.setswitchinterval(self._switch)
        end = self._last_t - self._t0
        points = list(self._points)
        if points[-1][0] != end:
            points.append((end, self._used))
        return Timeline(
            path=self.path,
            interval=self.interval,
            shm_total=self._total,
            baseline=self._baseline,
            peak=self._peak,
            peak_t=self._peak_t - self._t0,
            samples=tuple(points),
            n_samples=self._n,
            mean_interval=end / max(self._n - 1, 1),
            max_gap=self._max_gap,
            realtime=self._realtime,
            owners=tuple(self._owners),
            errors=tuple(self._errors),
            torch_largest=self._torch_largest,
            torch_creators=len(self._torch_creators),
        )

    # ------------------------------------------------------------------- loops

    def _fast(self) -> None:
        if self.realtime_wanted:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
                self._realtime = True
            except (OSError, AttributeError):
                self._realtime = False
        # Hot loop: locals only, one clock read per poll; counters are written back at the end
        # and "used"/"peak" (read live by the hang detector) only when they change.
        path, interval, is_set = self.path, self.interval, self._stop.is_set
        statvfs, monotonic, sleep = os.statvfs, time.monotonic, time.sleep
        points, t0, cap = self._points, self._t0, MAX_POINTS
        used, peak = self._used, self._peak
        n, max_gap, last = self._n, 0.0, self._last_t
        waker, self._waker = self._waker, None
        wait = waker.wait if waker is not None else None
        burst = 0  # event-triggered polls since the last clock poll
        due = last + interval
        try:
            while not is_set():
                delay = due - last
                if delay <= 0:
                    due, burst = last + interval, 0  # behind: do not burst to catch up
                elif wait is None or burst >= EVENT_POLLS:
                    sleep(delay)
                    due, burst = due + interval, 0
                elif wait(delay):
                    burst += 1
                else:
                    due, burst = due + interval, 0
                try:
                    st = statvfs(path)
                except OSError as err:
                    if err.errno not in (errno.ENOENT, errno.ESRCH):  # gone: the run is over
                        self._errors.setdefault(f"{path}: {err.strerror}", None)
                    break
                now = monotonic()
                if now - last > max_gap:
                    max_gap = now - last
                last = now
                n += 1
                value = (st.f_blocks - st.f_bfree) * st.f_frsize
                if value != used:
                    used = self._used = value
                    self._last_change = now
                    if len(points) < cap:
                        points.append((now - t0, value))
                    if value > peak:
                        peak = self._peak = value
                        self._peak_t = now
        finally:
            if waker is not None:
                waker.close()
        self._n, self._max_gap, self._last_t = n, max_gap, last

    def _slow(self) -> None:
        scan = self._scan
        while not self._stop.wait(self.owner_interval):
            self._snapshot(scan)

    def _snapshot(self, scan: Callable[..., Any] | None) -> None:
        import psutil

        t = time.monotonic() - self._t0
        shm_used = self._used
        pids = self.pids() if self.pids is not None else []
        by_kind: Mapping[str, int] = {}
        held = 0
        if scan is not None and pids:
            result = scan(pids=pids)
            by_kind, held = dict(result.by_kind), result.total_bytes
            files = [f for holding in result.processes for f in holding.files]
            for f in (*files, *result.unheld):
                m = _TORCH_NAME.search(f.path) if f.kind == "torch" else None
                if m is not None:
                    self._torch_creators.add(m.group(1))
                    self._torch_largest = max(self._torch_largest, f.bytes)
            for line in result.errors[:3]:
                if "no such process" not in line:
                    self._errors.setdefault(line, None)
        rss = 0
        cpu_now: dict[int, float] = {}
        live: dict[int, Any] = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = psutil.Process(pid)
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    times = proc.cpu_times()
                cpu_now[pid] = times.user + times.system
                live[pid] = proc
            except psutil.Error:
                continue
        # An exited process keeps counting with the CPU time it had at its last snapshot.
        self._cpu_done += sum(c for pid, c in self._cpu_last.items() if pid not in cpu_now)
        self._cpu_last = cpu_now
        self._procs = live
        cpu = sum(cpu_now.values())
        usage = None
        if self.usage_file is not None:
            try:
                usage = int(self.usage_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                usage = None
        snap = OwnerSnapshot(
            t=t,
            shm_used=shm_used,
            by_kind=by_kind,
            held_bytes=held,
            processes=len(pids),
            rss=rss,
            memory_usage=usage,
            cpu_seconds=cpu + self._cpu_done,
        )
        with self._lock:
            self._owners.append(snap)

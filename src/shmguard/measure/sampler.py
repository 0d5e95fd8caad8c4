"""The one /dev/shm sampler: measure, probe, ``shmguard run`` (the entrypoint, ``--watch``), the
PyTorch guard, ``shmguard watch`` and the exporter all read /dev/shm through it.

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
* the **slow loop** (optional, :class:`shmguard.measure.owners.OwnerTracker`) attributes the
  space to owner kinds with :func:`shmguard.inspect.holders.scan_holders` over the given
  process tree, sums the tree's RSS and CPU time (psutil) and reads the memory cgroup's
  current usage.

SCHED_FIFO and the 0.5 ms switch interval are for measuring (measure, probe and ``run``'s own
sampler); :meth:`ShmSampler.watcher` makes a sampler that changes neither and keeps a bounded
ring of change points, for a watcher inside another process (the PyTorch guard) or running for
days (``shmguard watch``, the exporter's samplers). What a watcher keeps between two looks to
judge a stall (the failed-block baseline, the CPU mark) is the one stall observer's,
:class:`shmguard.measure.stall.StallObserver`.

The library never prints; callers read :meth:`ShmSampler.reading` (live) or
:meth:`ShmSampler.stop`'s :class:`~shmguard.measure.timeline.Timeline` (typed values in
:mod:`shmguard.measure.timeline`).
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shmguard.measure._inotify import Waker, open_waker
from shmguard.measure._threads import start_thread
from shmguard.measure.owners import OwnerTracker
from shmguard.measure.timeline import OwnerSnapshot, Reading, Timeline, shm_usage

__all__ = [
    "EVENT_POLLS",
    "MAX_POINTS",
    "WATCH_POINTS",
    "OwnerSnapshot",
    "Reading",
    "ShmSampler",
    "Timeline",
    "shm_usage",
]

#: Keep at most this many change points (about 3 MB of tuples): a measuring run keeps the
#: first ones and drops later ones; a watcher (``ring=True``) keeps the most recent ones.
MAX_POINTS = 200_000
#: Change points a long-running watcher keeps (:meth:`ShmSampler.watcher`): a ring of about
#: 1 MB of tuples, so days of watching hold the same memory as minutes.
WATCH_POINTS = 20_000
#: At most this many extra polls on inotify events between two clock polls: a stream of small
#: writes must not turn the fast loop into a busy poll.
EVENT_POLLS = 8


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
        max_points: change points kept (:data:`MAX_POINTS`).
        ring: keep the most recent ``max_points`` change points (a bounded ring, for
            watchers that run for days) instead of the first ones (measure, probe: the
            start of a run is what they report); :attr:`Timeline.dropped_points` counts the
            ones left out either way.
        hold: keep the file system open from the first poll to :meth:`stop` and poll it
            through that directory descriptor: a sandbox's /dev/shm then outlives its mount
            namespace until the sampler is done, and :meth:`stop` takes one last poll, so
            what the command wrote just before it ended is seen even when the fast loop
            was not scheduled in between (measure and probe under load). False for a
            watcher of a path that may be mounted over: it polls the path.

    For a watcher inside another process or running for days use :meth:`watcher`: it changes
    nothing process-wide (no switch interval, no real-time scheduling) and keeps a ring.
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
        max_points: int = MAX_POINTS,
        ring: bool = False,
        hold: bool = False,
    ) -> None:
        if interval <= 0 or owner_interval <= 0:
            raise ValueError("sampling intervals must be > 0")
        if max_points < 2:
            raise ValueError("max_points must be at least 2")
        self.max_points = max_points
        self.ring = ring
        self.hold = hold
        self._fd: int | None = None
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
        self._points: list[tuple[float, int]] | deque[tuple[float, int]] = []
        self._changes = 0
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
        self._tracker: OwnerTracker | None = None
        self._switch = 0.005

    @classmethod
    def watcher(
        cls,
        path: Path | str,
        interval: float = 0.01,
        *,
        pids: Callable[[], list[int]] | None = None,
        owner_interval: float = 1.0,
        usage_file: Path | None = None,
        max_points: int = WATCH_POINTS,
        scan: Callable[..., Any] | None = None,
    ) -> ShmSampler:
        """A sampler safe to run inside another process or for days: ``realtime=False`` and
        ``fast_switch=False`` (nothing process-wide changes), inotify wake-ups on, and a ring
        of the last ``max_points`` change points. ``interval`` below 10 ms is for measuring,
        not watching (the constructor takes it)."""
        return cls(
            path,
            interval=interval,
            pids=pids,
            owner_interval=owner_interval,
            usage_file=usage_file,
            realtime=False,
            scan=scan,
            events=True,
            fast_switch=False,
            max_points=max_points,
            ring=True,
        )

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
        tracker = self._tracker
        return tracker.torch_seen() if tracker is not None else (frozenset(), 0)

    def since_peak(self) -> float:
        """Seconds since the peak was last raised."""
        return time.monotonic() - self._peak_t

    def latest_owner(self) -> OwnerSnapshot | None:
        """The most recent slow-loop snapshot."""
        with self._lock:
            return self._owners[-1] if self._owners else None

    def reading(self) -> Reading:
        """The live values as one typed :class:`Reading` (safe from any thread)."""
        now = time.monotonic()
        return Reading(
            t=now - self._t0,
            used=self._used,
            total=self._total,
            peak=self._peak,
            since_change=now - self._last_change,
            n_samples=self._n,
            owner=self.latest_owner(),
            errors=tuple(self._errors),
        )

    def recent(self, seconds: float) -> tuple[tuple[float, int], ...]:
        """The kept ``(t, used)`` change points of the last ``seconds`` (``t`` in seconds since
        start), oldest first; the point in force at the window's start comes first when kept.
        Safe while the fast loop appends (a copy is retried if it changed meanwhile)."""
        for _ in range(8):
            try:
                points = tuple(self._points)
                break
            except RuntimeError:  # deque mutated during the copy
                continue
        else:
            return ()
        start = time.monotonic() - self._t0 - seconds
        inside = [i for i, (t, _) in enumerate(points) if t >= start]
        first = max(inside[0] - 1, 0) if inside else max(len(points) - 1, 0)
        return points[first:]

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Take the first poll (raising OSError if the path cannot be read) and start."""
        if self.hold:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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
        if self.ring:
            self._points = deque([(0.0, used)], maxlen=self.max_points)
        else:
            self._points = [(0.0, used)]
        self._changes = 0
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
            self._tracker = OwnerTracker(self.pids, self._scan, self.usage_file, self._errors)
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
        self._release()

    def stop(self) -> Timeline:
        """Stop both loops and return what they saw (with ``hold``, after one last poll)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        if self.fast_switch:
            sys.setswitchinterval(self._switch)
        if self._fd is not None:
            self._last_poll(self._fd)
            self._release()
        end = self._last_t - self._t0
        points = list(self._points)
        dropped = self._changes + 1 - len(points)
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
            torch_largest=self.torch_seen()[1],
            torch_creators=len(self.torch_seen()[0]),
            dropped_points=dropped,
        )

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _last_poll(self, fd: int) -> None:
        """One poll after the loops ended, through the held descriptor."""
        try:
            st = os.statvfs(fd)
        except OSError as err:
            self._errors.setdefault(f"{self.path}: {err.strerror}", None)
            return
        now = time.monotonic()
        self._n += 1
        self._max_gap = max(self._max_gap, now - self._last_t)
        self._last_t = now
        value = (st.f_blocks - st.f_bfree) * st.f_frsize
        if value != self._used:
            self._used = value
            self._last_change = now
            self._changes += 1
            if self.ring or len(self._points) < self.max_points:
                self._points.append((now - self._t0, value))
            if value > self._peak:
                self._peak, self._peak_t = value, now

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
        target: int | str = self._fd if self._fd is not None else path
        points, t0 = self._points, self._t0
        # A ring (a deque with maxlen) takes every point and drops its oldest; a list stops.
        cap = self.max_points + 1 if self.ring else self.max_points
        changes = self._changes
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
                    st = statvfs(target)
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
                    changes += 1
                    if len(points) < cap:
                        points.append((now - t0, value))
                    if value > peak:
                        peak = self._peak = value
                        self._peak_t = now
        finally:
            if waker is not None:
                waker.close()
        self._n, self._max_gap, self._last_t, self._changes = n, max_gap, last, changes

    def _slow(self) -> None:
        tracker = self._tracker
        assert tracker is not None
        while not self._stop.wait(self.owner_interval):
            snap = tracker.snapshot(time.monotonic() - self._t0, self._used)
            with self._lock:
                self._owners.append(snap)

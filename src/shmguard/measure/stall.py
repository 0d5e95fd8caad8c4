"""The one stall observer: what a watcher keeps between two looks at a job to feed the stall
verdict (:func:`shmguard.triage.stall.stall_verdict`, which judges; this module only observes).

Three pieces of bookkeeping, the same for ``measure``/``probe``/``run --watch``
(:class:`~shmguard.measure.hang.HangDetector`), ``shmguard watch``
(:class:`~shmguard.monitor.watch.Monitor`), the exporter
(:class:`~shmguard.monitor.exporter.ShmCollector`) and the PyTorch guard
(:class:`~shmguard.torch.watch.Watch`):

* **the failed-block baseline**: the zero-block ``torch_*`` files already in /dev/shm when
  watching began are another run's leftovers, not failed allocations of this job
  (:meth:`StallObserver.take_baseline`, :meth:`StallObserver.failed`);
* **the progress test**: the process tree's CPU time grew by more than
  :data:`CPU_SHARE` of one core over the window plus :data:`CPU_SLACK` seconds
  (:func:`cpu_progressed`; :meth:`StallObserver.cpu_flat`, :meth:`StallObserver.cpu_stepped`);
* **process-tree CPU**: user + system seconds summed over the tree, a process that exited
  counting with the time it had at its last reading, so the sum never falls when a worker
  ends (:class:`TreeCpu`; :class:`~shmguard.measure.owners.OwnerTracker` sums it the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from shmguard.triage.stall import failed_torch_blocks, failed_torch_sizes

__all__ = [
    "CPU_SHARE",
    "CPU_SLACK",
    "StallObserver",
    "TreeCpu",
    "cpu_progressed",
]

#: Share of one core the tree's CPU time must grow by over a window to count as progress: a
#: job waiting on a lost batch burns next to nothing, a slow step more.
CPU_SHARE = 0.05
#: CPU seconds of growth always allowed on top (psutil reads clock ticks of 10 ms; a waiting
#: job's timers and the interpreter's own housekeeping add a few).
CPU_SLACK = 0.05


def cpu_progressed(cpu0: float, cpu: float, elapsed: float) -> bool:
    """Whether CPU seconds going from ``cpu0`` to ``cpu`` over ``elapsed`` seconds is progress:
    ``cpu - cpu0 > CPU_SHARE * elapsed + CPU_SLACK``."""
    return cpu - cpu0 > CPU_SHARE * elapsed + CPU_SLACK


class TreeCpu:
    """CPU seconds (user + system) of a process tree, summed over its processes; a process
    that left the tree (exited) keeps counting with the time it had at its last reading."""

    def __init__(self) -> None:
        self._done = 0.0
        self._last: dict[int, float] = {}

    def add(self, per_pid: Mapping[int, float]) -> float:
        """The tree's CPU seconds given each live process's own (``{pid: seconds}``)."""
        self._done += sum(c for pid, c in self._last.items() if pid not in per_pid)
        self._last = dict(per_pid)
        return sum(per_pid.values()) + self._done

    def read(self, pids: Iterable[int]) -> float:
        """Read each pid's CPU times with psutil (a vanished one is skipped) and :meth:`add`
        them."""
        import psutil

        per_pid: dict[int, float] = {}
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            per_pid[pid] = t.user + t.system
        return self.add(per_pid)


class StallObserver:
    """The failed-block baseline and the CPU mark of one watcher of one /dev/shm.

    Args:
        path: the /dev/shm directory listed for failed allocations' files.

    A watcher that starts with the job calls :meth:`take_baseline` first; one that attaches
    to a running job (``shmguard watch``) does not, and counts every such file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        #: names of the zero-block ``torch_*`` files there at :meth:`take_baseline` (None
        #: before it: every file counts).
        self.before: frozenset[str] | None = None
        self._mark: tuple[float, float] | None = None  # (time, CPU seconds)

    def take_baseline(self) -> frozenset[str]:
        """Remember the failed allocations' files there now as old leftovers (the first call
        only; later calls return the same names)."""
        if self.before is None:
            self.before = failed_torch_blocks(self.path)
        return self.before

    def failed(self) -> tuple[tuple[str, int], ...]:
        """``(name, bytes asked for)`` of each failed allocation's file not in the baseline,
        sorted by name (:func:`~shmguard.triage.stall.failed_torch_sizes`)."""
        old = self.before or frozenset()
        return tuple((n, size) for n, size in failed_torch_sizes(self.path) if n not in old)

    def cpu_flat(self, now: float, cpu: float) -> float | None:
        """Seconds the tree's CPU time (``cpu`` at ``now``) has been flat: since the mark, set
        at the first call after :meth:`reset_cpu` and moved on each progress
        (:func:`cpu_progressed` since the mark). None when this call set or moved the mark."""
        mark = self._mark
        if mark is None or cpu_progressed(mark[1], cpu, now - mark[0]):
            self._mark = (now, cpu)
            return None
        return now - mark[0]

    def cpu_stepped(self, now: float, cpu: float) -> bool:
        """Whether the CPU time progressed since the previous call (:func:`cpu_progressed`
        over the time between the two); the mark moves at every call. The exporter's window:
        one scrape to the next."""
        mark, self._mark = self._mark, (now, cpu)
        return mark is not None and cpu_progressed(mark[1], cpu, now - mark[0])

    def reset_cpu(self) -> None:
        """Forget the CPU mark (the next :meth:`cpu_flat` sets it afresh)."""
        self._mark = None

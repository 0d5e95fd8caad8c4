"""Hang detection for a running measurement: /dev/shm full and nothing progressing.

The verdict is the one stall verdict (:func:`shmguard.triage.stall.stall_verdict`); this
module gathers its observations from a running sandbox. A failed allocation in the live output
is recognised by the triage catalogue (the one classifier; :mod:`shmguard.measure.outcome`
turns a finished run into a cause), cheaply: a literal pre-filter over each chunk, the
catalogue's regular expressions only on a hit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from shmguard.measure.outcome import is_shm_failure, shm_failures
from shmguard.measure.owners import namespace_pids, torch_creator
from shmguard.measure.sampler import ShmSampler
from shmguard.measure.stall import StallObserver
from shmguard.triage.model import Signature
from shmguard.triage.scanner import make_finder
from shmguard.triage.stall import ShmObservation, stall_verdict
from shmguard.triage.text import builtin_catalogue, classify_text


@functools.cache
def _failure_finder() -> Callable[[bytes], list[int]]:
    """The catalogue's literal pre-filter restricted to the shm failure signatures (those
    :func:`shm_failures` keeps): a cheap test of whether a chunk can report one at all."""
    sigs: tuple[Signature, ...] = builtin_catalogue()
    literals = sorted(
        {p.literal for s in sigs if is_shm_failure(s) for p in s.patterns if not p.marker}
    )
    find, _backend = make_finder(literals)
    return find


#: Bytes of an unfinished output line kept so a message split across two chunks still matches.
_CARRY = 4096
#: Bytes of output kept while /dev/shm is not yet near full, scanned once it is.
_RECENT = 4096
#: Seconds between listings of /dev/shm for failed allocations while it is not near full (near
#: full, every check lists it).
_LIST_EVERY = 1.0


class HangDetector:
    """A ``stop_check`` for :meth:`Sandbox.wait`: "hang" when the stall verdict says so.

    Full means (:class:`~shmguard.triage.stall.ShmObservation`): no free page left now, or
    free space (now or at the peak) below ``full_margin`` bytes (give the largest single
    allocation seen, about one batch; the largest ``torch_*`` block the owner scans saw and
    the largest failed request count too, see :meth:`margin`) or 2% of the size **and** a
    failed allocation: in the
    output (what :func:`shm_failures` keeps of the catalogue's results: ``No space left on
    device``, ``unable to allocate shared memory(shm)``, a feeder-thread failure, a SIGBUS) or
    a new zero-block ``torch_*`` file whose creator (the pid in its name) is still in the
    sampler's process tree (when it has one; when such files exist and all their creators
    have exited, a failure in the output does not count either: the job got past it).
    Without that evidence, a job that merely holds most of its /dev/shm and idles (a
    ``fallocate`` then a sleep, a slow step) is not a hang: calling it one made probe report
    sizes above the real minimum. No progress means: used bytes
    unchanged, no output, and the tree's CPU time flat (the one stall observer,
    :class:`~shmguard.measure.stall.StallObserver`: less than 5% of one core over the window,
    plus 0.05 s).

    Args:
        sampler: the running sampler (its slow loop must be on for the CPU criterion).
        after: seconds without progress before calling it a hang.
        full_margin: bytes; free space below this counts as full.
        clock: time source (tests).
    """

    def __init__(
        self,
        sampler: ShmSampler,
        after: float = 5.0,
        full_margin: int = 0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.sampler = sampler
        self.after = after
        self.full_margin = full_margin
        self.clock = clock or time.monotonic
        self.last_output = self.clock()
        #: the failed-block baseline (taken at the first check) and the CPU mark.
        self.observer = StallObserver(sampler.path)
        self.alloc_failed = False
        self._carry = b""
        self._pending = b""
        self.failed_blocks = 0
        #: bytes the largest of those new failed allocations asked for.
        self.failed_request = 0
        #: True when failed allocations left files and every process that made them has
        #: exited: the job got past them, so a failure in the output is no evidence either.
        self.failures_past = False
        self._listed = float("-inf")

    @property
    def blocks_before(self) -> frozenset[str] | None:
        """Zero-block ``torch_*`` names already there at the first check (old leftovers;
        None before it)."""
        return self.observer.before

    def saw_output(self, _stream: str = "", chunk: bytes = b"") -> None:
        """Record output activity, and whether it reports a failed shm allocation (use as the
        sandbox's ``on_output``)."""
        self.last_output = self.clock()
        # Only scanned once /dev/shm came near its limit (a failed allocation happens there),
        # so a job printing gigabytes with plenty of room costs nothing here. The literal
        # pre-filter (one Aho-Corasick pass) lets only chunks that may report a failure
        # through to the catalogue's regular expressions and explanations. Below that, the last
        # bytes are kept unscanned: the error line can arrive before the sampler has seen the
        # allocation that filled /dev/shm, and :meth:`full` scans them once it has.
        if chunk and not self.alloc_failed:
            if self._near_full():
                self._scan(self._pending + chunk)
                self._pending = b""
            else:
                self._pending = (self._pending + chunk)[-_RECENT:]

    def _scan(self, chunk: bytes) -> None:
        data = self._carry + chunk
        if _failure_finder()(data):
            self.alloc_failed = bool(shm_failures(classify_text(data)))
        self._carry = data[data.rfind(b"\n") + 1 :][-_CARRY:]

    def observe(self, quiet: float = 0.0) -> ShmObservation:
        """What the stall verdict sees now: the sampler's figures, this detector's evidence.

        Args:
            quiet: seconds without progress (output, a /dev/shm change, CPU) to report.
        """
        s = self.sampler
        return ShmObservation(
            used=s.used,
            total=s.total,
            peak=s.peak,
            margin=self.margin(),
            alloc_failed=self.alloc_failed and not self.failures_past,
            failed_blocks=self.failed_blocks,
            quiet=quiet,
        )

    def margin(self) -> int:
        """Bytes of free space below which /dev/shm counts as near full: the largest of
        ``full_margin``, the largest ``torch_*`` block the owner scans saw (about one batch)
        and the largest request of a new failed allocation (its zero-block file's size).

        A failed allocation frees its partial pages at once, so a 10 ms sampler can miss the
        moment /dev/shm was full: a loader that hung on a 24 MiB batch in 64 MiB showed a
        peak 5.6 MiB below the size (above the 2% floor) and 16 MiB free, less than the batch
        it could not allocate; with 24 MiB batches in a 16 MiB /dev/shm no allocation ever
        succeeds and the peak stayed at 80 KiB."""
        return max(self.full_margin, self.sampler.torch_seen()[1], self.failed_request)

    def _near_full(self) -> bool:
        return self.observe().near_full

    def full(self) -> bool:
        """Whether /dev/shm counts as full (see the class docstring)."""
        obs = self.observe()
        # Near full, every check lists /dev/shm; otherwise once a second, since a failed
        # request larger than the free space makes it near full at any use. Full, it is listed
        # again once a second too: a failed allocation whose process has exited since is no
        # evidence any more (the peak keeps /dev/shm near full, so without a new listing a job
        # that got past the failure was stopped once it waited quietly).
        stale = self.clock() - self._listed >= _LIST_EVERY
        if stale or (obs.near_full and not obs.full):
            self._count_failed_blocks()
            obs = self.observe()
        if obs.full:
            return True
        if not obs.near_full:
            return False
        if self._pending and not self.alloc_failed:
            self._scan(self._pending)
            self._pending = b""
        return self.observe().full

    def _count_failed_blocks(self) -> None:
        # Names already there at the first check (the baseline) are old leftovers and do not
        # count; nor does the failed allocation of a process that has exited since: the job
        # got past it (a loader that fell back to num_workers=0 after its workers' batches
        # did not fit, then waited quietly at a barrier, was stopped as a stall), while the
        # worker of a hung loader lives on, waiting for work.
        self._listed = self.clock()
        new = list(self.observer.failed())
        self.failures_past = False
        if new and self.sampler.pids is not None:
            live = namespace_pids(self.sampler.pids())
            new_live = [(n, size) for n, size in new if torch_creator(n) in live]
            # a loader that logged its failure and fell back was stopped as a stall: its
            # output showed the failure and the peak kept /dev/shm near full
            self.failures_past = not new_live
            new = new_live
        self.failed_blocks = len(new)
        self.failed_request = max((size for _, size in new), default=0)

    def __call__(self) -> str | None:
        now = self.clock()
        self.observer.take_baseline()
        if not self.full():
            self.observer.reset_cpu()
            return None
        snap = self.sampler.latest_owner()
        cpu = snap.cpu_seconds if snap is not None else 0.0
        flat = self.observer.cpu_flat(now, cpu)
        if flat is None:  # the mark was set or moved: no quiet window yet
            return None
        quiet = min(flat, now - self.last_output, self.sampler.since_change())
        return "hang" if stall_verdict(self.observe(quiet), self.after).stalled else None

"""The guard's watcher: the one sampler on /dev/shm, and the one stall verdict over what it saw.

Used by :mod:`shmguard.torch.guarded`; see its docstring for how the main thread is woken to
ask it.
"""

from __future__ import annotations

import math

from shmguard.estimate import padded_bytes
from shmguard.torch.errors import ShmState
from shmguard.triage.stall import ShmObservation, StallVerdict, stall_verdict

#: Default seconds without a batch, on a full /dev/shm, before the guard calls it a hang.
DEFAULT_STALL_AFTER = 30.0
#: Default seconds between the watcher's statvfs polls.
DEFAULT_WATCH_INTERVAL = 0.05


def recommended_timeout(longest_wait: float) -> int:
    """Seconds for ``DataLoader(timeout=...)``: ten times the longest wait for a batch seen
    (the first batch, with the workers' start, left out), rounded up to 10 s, at least 60."""
    return max(60, math.ceil(longest_wait) * 10)


def proven_peak(sampled: int, total: int, failed: tuple[tuple[str, int], ...]) -> int:
    """The peak: the highest use sampled, or what a failed allocation proves if that is more.

    tmpfs refuses an allocation of ``n`` bytes only when fewer than its pages are free, so a
    zero-block ``torch_*`` file asking for ``n`` proves that use reached ``total`` less ``n``'s
    pages (the smallest request proves the most). A sampler polling every half second on a
    loaded machine can miss that moment: the workers fill /dev/shm and fail within one poll,
    and the main thread has consumed batches by the next (seen in CI: sampled 35 MiB of 64 MiB
    beside a failed 18.4 MiB allocation, which proves more than 45 MiB).
    """
    if not failed or total <= 0:
        return sampled
    smallest = min(n for _, n in failed)
    return max(sampled, total - padded_bytes((smallest,)))


class Watch:
    """The watcher thread (the one sampler, :meth:`ShmSampler.watcher
    <shmguard.measure.sampler.ShmSampler.watcher>`), the failed-block baseline (the one stall
    observer, :class:`~shmguard.measure.stall.StallObserver`) and the stall verdict over what
    they saw."""

    def __init__(self, path: str, interval: float, stall_after: float, margin: int) -> None:
        # Imported here: ``import shmguard.torch`` stays light until a loader is guarded.
        from shmguard.measure.sampler import ShmSampler
        from shmguard.measure.stall import StallObserver

        self.path = path
        self.stall_after = stall_after
        self.margin = margin
        self.sampler = ShmSampler.watcher(path, interval=interval)
        self.observer = StallObserver(path)
        self.observer.take_baseline()
        self.sampler.start()
        self.baseline = self.sampler.used

    def state(self) -> ShmState:
        s = self.sampler
        failed = self.observer.failed()
        return ShmState(
            self.path, s.used, s.total, proven_peak(s.peak, s.total, failed), self.baseline, failed
        )

    def observe(self, waited: float, state: ShmState | None = None) -> StallVerdict:
        state = state or self.state()
        asked = max((n for _, n in state.failed_files), default=0)
        quiet = min(waited, self.sampler.since_change())
        obs = ShmObservation(
            used=state.used,
            total=state.total,
            peak=state.peak,
            margin=max(self.margin, padded_bytes((asked,)) if asked else 0),
            failed_blocks=len(state.failed_files),
            quiet=quiet,
        )
        return stall_verdict(obs, self.stall_after)

    def stop(self) -> None:
        # Waited for (one interval at most), so that no thread and no inotify descriptor of
        # the guard outlives its loop.
        self.sampler.cancel(wait=max(1.0, 2 * self.sampler.interval))


def chain_text(err: BaseException) -> str:
    """The text of ``err`` and every exception it was raised from or during."""
    parts: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return "\n".join(reversed(parts))

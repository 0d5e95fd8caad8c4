"""``--trial-time``: a job that never ends on its own passes once it has run long enough with
/dev/shm steady (a training server, a data pipeline that loops forever).

The check is a helper of the ``stop_check`` that :func:`shmguard.measure.run.measure_command`
gives :meth:`Sandbox.wait`: once the run has lasted ``run_for`` seconds **and** /dev/shm is
steady, the sandbox is stopped cleanly (:meth:`Sandbox.stop`: SIGTERM, SIGKILL after a grace
period) with ``stopped_by`` = :data:`~shmguard.measure.outcome.TRIAL_TIME`, which
:func:`~shmguard.measure.outcome.classify` counts as a pass unless the output reports a failed
shared memory allocation. Steady means: the peak was last raised at least :func:`settle_time`
ago, and /dev/shm is not full as the hang detector defines it (nearly full with a failed
allocation seen). A job whose /dev/shm still grows at ``run_for`` keeps running until it is
steady, fills up (a failure) or reaches the trial timeout. A job that has not used /dev/shm at
all yet is still starting (importing its libraries, loading a model): it is not steady before
:func:`first_use_wait` seconds, so a slow start is not stopped at a peak of 0 B and passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from shmguard.measure.hang import HangDetector
from shmguard.measure.sampler import ShmSampler

#: Seconds between the SIGTERM that stops a run at its trial time and the SIGKILL.
STOP_GRACE = 5.0
#: Bounds of the settle time in seconds.
SETTLE_MIN, SETTLE_MAX = 0.5, 30.0
#: Seconds beyond ``run_for`` that a run which has not used /dev/shm yet gets, at least.
FIRST_USE_EXTRA = 10.0


def settle_time(run_for: float) -> float:
    """Seconds without a new /dev/shm peak that count as steady: a quarter of ``run_for``,
    at least :data:`SETTLE_MIN`, at most :data:`SETTLE_MAX`."""
    return min(SETTLE_MAX, max(SETTLE_MIN, run_for / 4))


def first_use_wait(run_for: float) -> float:
    """Seconds a run that has not used any /dev/shm yet must last before it counts as steady:
    3x ``run_for``, at least ``run_for`` + :data:`FIRST_USE_EXTRA` (a job that never uses
    /dev/shm is stopped then and passes)."""
    return max(3 * run_for, run_for + FIRST_USE_EXTRA)


class SurvivalCheck:
    """Says when a run has survived ``run_for`` seconds with /dev/shm steady.

    Args:
        sampler: the running sampler (peak and when it was last raised).
        detector: the run's hang detector (its notion of "full").
        run_for: seconds the run must last (> 0).
        clock: time source (tests).
    """

    def __init__(
        self,
        sampler: ShmSampler,
        detector: HangDetector,
        run_for: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sampler = sampler
        self.detector = detector
        self.run_for = run_for
        self.settle = settle_time(run_for)
        self.first_use = first_use_wait(run_for)
        self.clock = clock
        self.started: float | None = None

    def begin(self) -> None:
        """The command was released: the clock starts."""
        self.started = self.clock()

    def steady(self) -> bool:
        """No new peak for :attr:`settle` seconds and /dev/shm not full."""
        return self.sampler.since_peak() >= self.settle and not self.detector.full()

    def due(self) -> bool:
        """True once ``run_for`` seconds have passed and /dev/shm is steady."""
        if self.started is None:
            return False
        elapsed = self.clock() - self.started
        if elapsed < self.run_for:
            return False
        if self.sampler.peak == 0 and elapsed < self.first_use:
            return False  # still starting: nothing on /dev/shm yet
        return self.steady()

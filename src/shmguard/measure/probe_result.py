"""What ``probe`` returns and reports as it goes: trials, pass rates, the result, the observer.

Kept apart from the search (:mod:`shmguard.measure.probe`) so renderers import the values
without the search; :mod:`shmguard.measure.probe` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shmguard.estimate import Recommendation
from shmguard.estimate.observed import ObservedLoader
from shmguard.measure.outcome import Outcome
from shmguard.measure.run import MeasureResult

#: Trial phases, in the order a search can use them.
PHASES = ("predict", "bracket", "bound", "bisect", "confirm", "verify")


@dataclass(frozen=True)
class Trial:
    """One run at one size.

    Attributes:
        size: tmpfs bytes.
        phase: one of :data:`PHASES`: ``predict`` (the DataLoader model's steady level),
            ``bracket`` (one tolerance step below it, or above it when it failed), ``bound`` (an
            upper bound from the measured peak), ``bisect``, ``confirm`` or ``verify``.
        passed: whether the command succeeded.
        outcome: the outcome class.
        summary: the cause in one sentence.
        exit_status: shell-convention status.
        peak: highest shm used bytes seen.
        wall_time: seconds.
        survived: it passed by running for the trial time with /dev/shm steady (shmguard
            stopped it; ``--trial-time``).
    """

    size: int
    phase: str
    passed: bool
    outcome: Outcome
    summary: str
    exit_status: int
    peak: int
    wall_time: float
    survived: bool = False


@dataclass(frozen=True)
class SizeStats:
    """Pass rate at one size: ``passes`` of ``runs``."""

    size: int
    passes: int
    runs: int


@dataclass(frozen=True)
class ProbeResult:
    """What probe found.

    Attributes:
        command: argv.
        measure: the measuring run.
        floor: bytes assumed failing (the search's lower end).
        tolerance: relative resolution asked for.
        confirm: passes in a row required at the minimum.
        minimum: smallest size that passed ``confirm`` times in a row, or None.
        minimum_basis: one sentence on how it was found, or why there is none.
        trials: every trial in order (the measuring run excluded).
        pass_rates: per size tried, ascending.
        recommendation: sizes to configure (None shm when no minimum).
        verified: whether the recommended size passed its verification run (None: not run).
        wall_time: seconds for the whole probe.
        model: the DataLoader the measuring run saw, as the model describes it, when the search
            started from its prediction; None otherwise.
        start_basis: one sentence: where the search started and why.
        trial_time: seconds after which a run still going with /dev/shm steady passed
            (``--trial-time``), or None.
    """

    command: tuple[str, ...]
    measure: MeasureResult
    floor: int
    tolerance: float
    confirm: int
    minimum: int | None
    minimum_basis: str
    trials: tuple[Trial, ...]
    pass_rates: tuple[SizeStats, ...]
    recommendation: Recommendation
    verified: bool | None
    wall_time: float
    model: ObservedLoader | None = None
    start_basis: str = ""
    trial_time: float | None = None

    @property
    def runs(self) -> int:
        """Sandboxed runs including the measuring one."""
        return len(self.trials) + 1

    @property
    def survived(self) -> int:
        """Runs (the measuring one included) that passed by surviving the trial time."""
        return sum(t.survived for t in self.trials) + int(self.measure.survived)


class ProbeObserver(Protocol):
    """Receives progress (the CLI draws a progress bar from it)."""

    def measuring(self, size: int) -> None:
        """The measuring run starts with a tmpfs of ``size`` bytes."""

    def trial_started(self, size: int, phase: str, lo: int, hi: int) -> None:
        """A trial starts; ``lo``/``hi`` are the current failing/passing bounds."""

    def trial_done(self, trial: Trial) -> None:
        """A trial ended."""

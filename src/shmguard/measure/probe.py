"""``probe``: the smallest /dev/shm size at which a command reliably succeeds.

1. One measuring run with a generous tmpfs gives the peak (and the largest single allocation).
2. A passing upper bound near the peak is established (raised by half until a trial passes).
3. Bisection between the floor (assumed failing) and that bound, on whole MiB, until the gap is
   at most ``tolerance`` of the bound (default 5%) or 1 MiB. Every trial is a fresh sandbox with
   a per-trial timeout and hang detection (shm full and no progress).
4. Near the edge results are random: a fast consumer passed 40-60% of runs a few MiB below its
   deterministic minimum (torch_shm.md section 4). So the candidate must pass ``confirm`` times
   in a row (the bisection pass counts); a failure moves it up one tolerance step and starts the
   count again.
5. The recommendation (the larger of minimum and measured peak, plus headroom, rounded to a clean
   value) is run once more to verify it.

Progress goes to an optional observer; the library never prints.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shmguard.estimate import Policy, Recommendation, recommend
from shmguard.estimate.recommend import no_recommendation
from shmguard.measure.outcome import Outcome
from shmguard.measure.run import MeasureResult, generous_shm_size, measure_command
from shmguard.measure.sandbox import RunInterrupted
from shmguard.units import MiB, format_iec, round_up


@dataclass(frozen=True)
class Trial:
    """One run at one size.

    Attributes:
        size: tmpfs bytes.
        phase: ``bound``, ``bisect``, ``confirm`` or ``verify``.
        passed: whether the command succeeded.
        outcome: the outcome class.
        summary: the cause in one sentence.
        exit_status: shell-convention status.
        peak: highest shm used bytes seen.
        wall_time: seconds.
    """

    size: int
    phase: str
    passed: bool
    outcome: Outcome
    summary: str
    exit_status: int
    peak: int
    wall_time: float


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
        floor: bytes assumed failing (the bisection's lower end).
        tolerance: relative resolution asked for.
        confirm: passes in a row required at the minimum.
        minimum: smallest size that passed ``confirm`` times in a row, or None.
        minimum_basis: one sentence on how it was found, or why there is none.
        trials: every trial in order (the measuring run excluded).
        pass_rates: per size tried, ascending.
        recommendation: sizes to configure (None shm when no minimum).
        verified: whether the recommended size passed its verification run (None: not run).
        wall_time: seconds for the whole probe.
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

    @property
    def runs(self) -> int:
        """Sandboxed runs including the measuring one."""
        return len(self.trials) + 1


class ProbeObserver(Protocol):
    """Receives progress (the CLI draws a progress bar from it)."""

    def measuring(self, size: int) -> None:
        """The measuring run starts with a tmpfs of ``size`` bytes."""

    def trial_started(self, size: int, phase: str, lo: int, hi: int) -> None:
        """A trial starts; ``lo``/``hi`` are the current failing/passing bounds."""

    def trial_done(self, trial: Trial) -> None:
        """A trial ended."""


def probe_command(
    command: Sequence[str],
    *,
    floor: int = 0,
    ceiling: int | None = None,
    tolerance: float = 0.05,
    confirm: int = 3,
    trial_timeout: float | None = None,
    hang_after: float = 5.0,
    headroom: float | None = None,
    policy: Policy | None = None,
    verify: bool = True,
    max_trials: int = 30,
    env: dict[str, str] | None = None,
    observer: ProbeObserver | None = None,
) -> ProbeResult:
    """Find the smallest reliable /dev/shm size for ``command``.

    Args:
        command: argv.
        floor: bytes assumed to fail (default 0).
        ceiling: tmpfs bytes of the measuring run (default half of RAM, at least 1 GiB).
        tolerance: stop bisecting when the gap is at most this fraction of the bound.
        confirm: passes in a row required at the minimum (>= 1).
        trial_timeout: seconds per trial; default 3x the measuring run, at least 30 s.
        hang_after: seconds of "shm full and no progress" that make a trial a hang.
        headroom: fraction added for the recommendation (default: the policy's).
        policy: the sizing policy (default :class:`~shmguard.estimate.Policy`).
        verify: run the recommended size once more.
        max_trials: hard cap on trials.
        env: environment for the command.
        observer: progress receiver.

    Raises:
        SandboxError: the sandbox could not be set up.
        RunInterrupted: shmguard got SIGINT/SIGTERM/SIGHUP/SIGQUIT during a run (the run that
            was cut short is not counted as a failure: the search stops).
        ValueError: for a tolerance outside (0, 1) or ``confirm < 1``.
    """
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be between 0 and 1, got {tolerance}")
    if confirm < 1:
        raise ValueError(f"confirm must be >= 1, got {confirm}")
    t_start = time.monotonic()
    top = ceiling or generous_shm_size()
    if observer:
        observer.measuring(top)
    base = measure_command(
        command,
        shm_size=top,
        headroom=headroom,
        policy=policy,
        hang_after=hang_after,
        output="capture",
        env=env,
    )
    if base.interrupted:
        raise RunInterrupted(base.interrupted)
    trials: list[Trial] = []
    timeout = trial_timeout or max(30.0, 3 * base.wall_time)
    margin = base.timeline.max_step()

    def done(
        minimum: int | None, basis: str, rec: Recommendation, verified: bool | None
    ) -> ProbeResult:
        stats: dict[int, list[int]] = {}
        for t in trials:
            s = stats.setdefault(t.size, [0, 0])
            s[0] += int(t.passed)
            s[1] += 1
        rates = tuple(SizeStats(k, v[0], v[1]) for k, v in sorted(stats.items()))
        return ProbeResult(
            tuple(command),
            base,
            floor,
            tolerance,
            confirm,
            minimum,
            basis,
            tuple(trials),
            rates,
            rec,
            verified,
            time.monotonic() - t_start,
        )

    if not base.passed:
        # The same words as measure: a failure that is not about /dev/shm gets no size and
        # says what to change instead.
        if base.cause.outcome.shm_related:
            reason = (
                f"the command fails even with {format_iec(top)} of /dev/shm "
                f"({base.cause.summary}); probe again with a larger --ceiling"
            )
        else:
            reason = (
                f"the command fails even with {format_iec(top)} of /dev/shm: "
                f"{base.recommendation.shm_basis}"
            )
        return done(None, reason, no_recommendation(reason, headroom, policy), None)

    lo, hi = floor, 0
    # A trial that exits 0 but prints a failed allocation the measuring run did not print
    # failed for lack of shm (a script that ignores the error still exits 0).
    strict = not base.alloc_errors

    def trial(size: int, phase: str) -> bool:
        if observer:
            observer.trial_started(size, phase, lo, hi)
        r = measure_command(
            command,
            shm_size=size,
            timeout=timeout,
            hang_after=hang_after,
            full_margin=margin,
            output="capture",
            owner_interval=0.2,
            env=env,
            strict=strict,
        )
        if r.interrupted:
            raise RunInterrupted(r.interrupted)
        t = Trial(
            size,
            phase,
            r.passed,
            r.cause.outcome,
            r.cause.summary,
            r.exit_status,
            r.peak,
            r.wall_time,
        )
        trials.append(t)
        if observer:
            observer.trial_done(t)
        return t.passed

    # 2. a passing bound near the peak
    hi = max(round_up(int(base.peak * (1 + tolerance)), MiB), round_up(floor + 1, MiB))
    while hi < top and not trial(hi, "bound"):
        lo = hi
        hi = min(top, round_up(int(hi * 1.5), MiB))
        if len(trials) >= max_trials:
            break
    if hi >= top:
        hi = top  # the measuring run passed here
    # 3. bisection
    while hi - lo > max(int(tolerance * hi), MiB) and len(trials) < max_trials:
        mid = round_up((lo + hi) // 2, MiB)
        if mid >= hi:
            mid = hi - MiB
        if mid <= lo:
            break
        if trial(mid, "bisect"):
            hi = mid
        else:
            lo = mid
    # 4. confirmations: `confirm` passes in a row, the bisection's own pass included
    streak = 1
    while streak < confirm and len(trials) < max_trials and hi < top:
        if trial(hi, "confirm"):
            streak += 1
        else:
            lo = hi
            hi = min(top, round_up(hi + max(int(tolerance * hi), MiB), MiB))
            streak = 0
    if streak < confirm and hi < top:
        basis = f"no size passed {confirm} times in a row within {max_trials} trials"
        return done(None, basis, no_recommendation(basis, headroom, policy), None)
    minimum = hi
    if streak >= confirm:
        basis = f"{format_iec(minimum)} passed {confirm} times in a row"
    else:
        # The search climbed back to the ceiling: only the measuring run passed there.
        basis = f"only the ceiling {format_iec(minimum)} passed (the measuring run)"
    if lo > floor:
        basis += f"; {format_iec(lo)} failed"
    need = max(minimum, base.peak)
    need_basis = "probed minimum" if minimum >= base.peak else "measured peak (above the minimum)"
    rec = recommend(
        need,
        need_basis,
        headroom=headroom,
        policy=policy,
        cgroup_peak=base.memory_peak,
        shm_peak=base.peak,
    )
    verified: bool | None = None
    if verify and rec.shm_size is not None:
        verified = trial(rec.shm_size, "verify")
    return done(minimum, basis, rec, verified)

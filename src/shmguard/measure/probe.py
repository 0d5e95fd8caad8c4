"""``probe``: the smallest /dev/shm size at which a command reliably succeeds.

1. One measuring run with a generous tmpfs gives the peak, and for a PyTorch DataLoader the
   workers and the batch size (the owner scans' ``torch_*`` blocks).
2. **From the model** (when the measuring run saw a DataLoader): the first trial (``predict``)
   runs at the model's steady level for that loader
   (:func:`~shmguard.estimate.observed.observed_loader`), or at the measuring run's own peak
   when that run completed clearly below the steady level (its queues never fill:
   :func:`start_level`), rounded up to a MiB; the second
   (``bracket``) one tolerance step below it when the first passed, above it when it failed.
   A pass above a failure one step apart brackets the minimum at once. When the size below
   passes too (the queues did not fill in that run: a short run, a fast consumer), the search
   bisects below it; when both fail (batches the program keeps, other shm users), an upper
   bound from the model's transient peak and the measured peak, then bisection between.
   **Without a DataLoader**: a passing upper bound near the measured peak (raised by half
   until a trial passes).
3. Bisection inside the bracket, on whole MiB, until the gap is at most ``tolerance`` of the
   passing end (default 5%) or 1 MiB. Every trial is a fresh sandbox with a per-trial timeout
   and hang detection (shm full and no progress).
4. Near the edge results are random: a fast consumer passed 40-60% of runs a few MiB below its
   deterministic minimum (torch_shm.md section 4). So the candidate must pass ``confirm`` times
   in a row (the pass that made it the candidate counts); a failure moves it up one tolerance
   step and starts the count again.
5. The recommendation (the one size decision, as ``measure``'s:
   :func:`~shmguard.measure.run.passed_run_recommendation` of the larger of minimum and
   measured peak, with the DataLoader model's peak for what the measuring run saw; the larger
   of those gets the headroom) is run once more to verify it.

When the model's level holds this is 6 runs (1 measuring, 2 to bracket, 2 more
confirmations, 1 verification) against 9 to 12 for the search from the peak
(benchmarks/probe_cost.py). Progress goes to an optional observer; the library never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from shmguard.estimate import Policy, Recommendation
from shmguard.estimate.observed import SLACK, ObservedLoader, observed_loader
from shmguard.estimate.recommend import no_recommendation
from shmguard.measure.probe_result import (
    PHASES,
    ProbeObserver,
    ProbeResult,
    SizeStats,
    Trial,
)
from shmguard.measure.run import (
    MeasureResult,
    generous_shm_size,
    measure_command,
    passed_run_recommendation,
)
from shmguard.measure.sandbox import RunInterrupted
from shmguard.units import MiB, format_iec, round_up

__all__ = ["PHASES", "ProbeObserver", "ProbeResult", "SizeStats", "Trial", "probe_command"]


class _Search:
    """The failing (``lo``) and passing (``hi``) ends and the trials run so far."""

    def __init__(
        self,
        run: Callable[[int], MeasureResult],
        lo: int,
        top: int,
        tolerance: float,
        max_trials: int,
        observer: ProbeObserver | None,
    ) -> None:
        self.run = run
        self.lo, self.hi, self.top = lo, 0, top
        self.tolerance = tolerance
        self.max_trials = max_trials
        self.observer = observer
        self.trials: list[Trial] = []

    def step(self, size: int) -> int:
        """One tolerance step below/above ``size``: whole MiB, at least 1 MiB."""
        return max(MiB, int(self.tolerance * size) // MiB * MiB)

    def spent(self) -> bool:
        return len(self.trials) >= self.max_trials

    def trial(self, size: int, phase: str) -> bool:
        if self.observer:
            self.observer.trial_started(size, phase, self.lo, self.hi)
        r = self.run(size)
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
            r.survived,
        )
        self.trials.append(t)
        if self.observer:
            self.observer.trial_done(t)
        return t.passed

    def bound(self, start: int) -> None:
        """Find a passing upper bound from ``start``, raising it by half after each failure."""
        self.hi = start
        while self.hi < self.top and not self.trial(self.hi, "bound"):
            self.lo = self.hi
            self.hi = min(self.top, round_up(int(self.hi * 1.5), MiB))
            if self.spent():
                break
        if self.hi >= self.top:
            self.hi = self.top  # the measuring run passed here

    def from_model(self, model: ObservedLoader, peak: int, confirm: int) -> int:
        """Search around the model's steady level (module docstring, step 2); returns the
        number of passes in a row at ``hi``."""
        level = start_level(model, peak, self.tolerance)
        if self.trial(level, "predict"):
            self.hi = level
            below = level - self.step(level)
            if below > self.lo and not self.spent():  # (the floor is assumed to fail)
                if self.trial(below, "bracket"):
                    # Less than the model's level was enough this time: the queues did not
                    # fill (a short run, a fast consumer) or the loader is set lower. Bisect
                    # below it; the confirmations decide whether that was luck.
                    self.hi = below
                    self.bisect()
                else:
                    self.lo = below
            return self.confirm(confirm)
        self.lo = level
        above = level + self.step(level)
        if above < self.top and not self.spent():
            if self.trial(above, "bracket"):
                self.hi = above
                return self.confirm(confirm)
            self.lo = above
        upper = max(
            round_up(model.prediction.peak, MiB),
            round_up(int(peak * (1 + self.tolerance)), MiB),
            self.lo + self.step(self.lo),
        )
        self.bound(min(upper, self.top))
        self.bisect()
        return self.confirm(confirm)

    def bisect(self) -> None:
        """Halve the gap until it is within the tolerance."""
        while self.hi - self.lo > max(int(self.tolerance * self.hi), MiB) and not self.spent():
            mid = round_up((self.lo + self.hi) // 2, MiB)
            if mid >= self.hi:
                mid = self.hi - MiB
            if mid <= self.lo:
                break
            if self.trial(mid, "bisect"):
                self.hi = mid
            else:
                self.lo = mid

    def confirm(self, confirm: int) -> int:
        """Passes in a row at ``hi`` (the pass that made it the candidate counts); a failure
        moves ``hi`` up one step. Returns the streak reached."""
        streak = 1
        while streak < confirm and not self.spent() and self.hi < self.top:
            if self.trial(self.hi, "confirm"):
                streak += 1
            else:
                self.lo = self.hi
                self.hi = min(self.top, round_up(self.hi + self.step(self.hi), MiB))
                streak = 0
        return streak


def start_level(model: ObservedLoader, peak: int, tolerance: float = 0.05) -> int:
    """Where the search from the model starts, in whole MiB: the model's steady level for the
    loader the measuring run saw, or, when that run completed clearly below the steady level
    (by more than :data:`~shmguard.estimate.observed.SLACK`), its own ``peak`` plus one
    ``tolerance`` step: that command's queues never fill (a short run, ``numpy_loader
    --batches 10``), so its measured peak is the evidence about it (the bracket one step
    below then tries the peak itself), and a search from the steady level only bisects down
    to it (12-15 runs instead of 6)."""
    level = model.prediction.steady
    if peak < level * (1 - SLACK):
        level = min(level, int(peak * (1 + tolerance)))
    return round_up(max(level, 1), MiB)


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
    memory_limit: int | None = None,
    cpus: float | None = None,
    trial_time: float | None = None,
    use_model: bool = True,
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
        memory_limit: bytes of memory limit for every run (as ``measure --memory``), or None.
        cpus: CPU quota for every run (as ``measure --cpus``), or None.
        trial_time: for a command that never ends on its own: seconds after which a run still
            going with /dev/shm steady is stopped and passes (``measure_command``'s
            ``run_for``), the measuring run included.
        use_model: start from the DataLoader model's prediction when the measuring run saw a
            DataLoader (False: always search from the measured peak, the search before the
            model; benchmarks/probe_cost.py compares the two).

    Raises:
        SandboxError: the sandbox could not be set up.
        RunInterrupted: shmguard got SIGINT/SIGTERM/SIGHUP/SIGQUIT during a run (the run that
            was cut short is not counted as a failure: the search stops).
        ValueError: for a tolerance outside (0, 1), ``confirm < 1`` or ``trial_time <= 0``.
    """
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be between 0 and 1, got {tolerance}")
    if confirm < 1:
        raise ValueError(f"confirm must be >= 1, got {confirm}")
    if trial_time is not None and not trial_time > 0:
        raise ValueError(f"trial_time must be > 0 seconds, got {trial_time}")
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
        memory_limit=memory_limit,
        cpus=cpus,
        run_for=trial_time,
    )
    if base.interrupted:
        raise RunInterrupted(base.interrupted)
    model = None
    if use_model and base.passed:
        tl = base.timeline
        model = observed_loader(tl.torch_creators, tl.torch_largest, base.peak)
        if model is not None and not floor < model.prediction.steady < top:
            model = None
    timeout = trial_timeout or max(30.0, 3 * base.wall_time)
    margin = base.timeline.max_step()
    # A trial that exits 0 but prints a failed allocation the measuring run did not print
    # failed for lack of shm (a script that ignores the error still exits 0).
    strict = not base.alloc_errors

    def run(size: int) -> MeasureResult:
        return measure_command(
            command,
            shm_size=size,
            timeout=timeout,
            hang_after=hang_after,
            full_margin=margin,
            output="capture",
            owner_interval=0.2,
            env=env,
            strict=strict,
            memory_limit=memory_limit,
            cpus=cpus,
            run_for=trial_time,
        )

    search = _Search(run, floor, top, tolerance, max_trials, observer)

    def done(
        minimum: int | None, basis: str, rec: Recommendation, verified: bool | None
    ) -> ProbeResult:
        stats: dict[int, list[int]] = {}
        for t in search.trials:
            s = stats.setdefault(t.size, [0, 0])
            s[0] += int(t.passed)
            s[1] += 1
        rates = tuple(SizeStats(k, v[0], v[1]) for k, v in sorted(stats.items()))
        if model is not None and start_level(model, base.peak, tolerance) < model.prediction.steady:
            start = (
                f"from the measured peak {format_iec(base.peak)}, below the steady level of "
                f"{model.basis}"
            )
        elif model is not None:
            start = f"from {model.basis}"
        elif base.passed:
            start = f"from the measured peak {format_iec(base.peak)}" + (
                " (no DataLoader seen)" if use_model else ""
            )
        else:
            start = "no search: the measuring run failed"
        return ProbeResult(
            tuple(command),
            base,
            floor,
            tolerance,
            confirm,
            minimum,
            basis,
            tuple(search.trials),
            rates,
            rec,
            verified,
            time.monotonic() - t_start,
            model,
            start,
            trial_time,
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

    if model is not None:
        streak = search.from_model(model, base.peak, confirm)
    else:
        search.bound(max(round_up(int(base.peak * (1 + tolerance)), MiB), round_up(floor + 1, MiB)))
        search.bisect()
        streak = search.confirm(confirm)
    hi, lo = search.hi, search.lo
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
    # The same decision as measure's, with the DataLoader model's peak: a minimum found in
    # runs whose queues never filled (a fast consumer) is below what any stall in production
    # fills.
    rec = passed_run_recommendation(
        base.timeline,
        base.memory_peak,
        need=need,
        need_basis=need_basis,
        headroom=headroom,
        policy=policy,
    )
    verified: bool | None = None
    if verify and rec.shm_size is not None:
        verified = search.trial(rec.shm_size, "verify")
    return done(minimum, basis, rec, verified)

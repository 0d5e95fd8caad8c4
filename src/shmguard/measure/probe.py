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
   steps down 2, 4, 8... tolerance steps until a size fails, then bisects (not below a
   ``predict`` at the measured peak: the confirmations follow there); when the ``predict``
   trial at the measured peak fails (a second run needed more than the first: a fast
   consumer, whose peak depends on scheduling), it settles at the model's steady level (step
   4); when both fail at the steady level (batches the program keeps, other shm users), an
   upper bound from the model's transient peak and the measured peak, then bisection between.
   **Without a DataLoader**: a passing upper bound near the measured peak (raised by half
   until a trial passes).
3. Bisection inside the bracket, on whole MiB, until the gap is at most ``tolerance`` of the
   passing end (default 5%) or 1 MiB. Every trial is a fresh sandbox with a per-trial timeout
   and hang detection (shm full and no progress).
4. Near the edge results are random: a fast consumer passed 40-60% of runs a few MiB below its
   deterministic minimum (torch_shm.md section 4). So the candidate must pass ``confirm`` times
   in a row (the pass that made it the candidate counts). A failure there is a non-monotonic
   result (it passed before): the band below is noisy, so it is not searched again; the
   highest size that failed is the floor of what probe promises, and the next candidate is
   the model's next level above it (steady, then transient peak) or 2, 4, 8... steps above it
   (:class:`~shmguard.measure.probe_search.Search`). ``max_runs`` bounds the whole search.
5. The recommendation (the one size decision, as ``measure``'s:
   :func:`~shmguard.measure.run.passed_run_recommendation` of the larger of minimum and
   measured peak, with the DataLoader model's peak for what the measuring run saw; the larger
   of those gets the headroom) is run once more to verify it.

When the model's level holds this is 6 runs (1 measuring, 2 to bracket, 2 more
confirmations, 1 verification) against 9 to 12 for the search from the peak
(benchmarks/probe_cost.py); a fast consumer whose measured peak fails is 6 too (1 measuring,
``predict``, 3 at the steady level, 1 verification). Progress goes to an optional observer;
the library never prints.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

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
from shmguard.measure.probe_search import Search
from shmguard.measure.run import (
    generous_shm_size,
    measure_command,
    passed_run_recommendation,
)
from shmguard.measure.sandbox import RunInterrupted
from shmguard.units import MiB, format_iec, round_up

__all__ = [
    "MAX_RUNS",
    "PHASES",
    "ProbeObserver",
    "ProbeResult",
    "SizeStats",
    "Trial",
    "probe_command",
]

#: Default run budget (``--max-runs``): the measuring run, the trials and the verification.
#: A loader whose queues fill needs 6, a search from the measured peak 9 to 13.
MAX_RUNS = 16


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
    max_runs: int = MAX_RUNS,
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
        max_runs: the run budget: sandboxed runs in all, the measuring run and the
            verification included (>= 3). When it runs out before a size passed ``confirm``
            times in a row, the candidate is the minimum only if it passed every run there
            (the basis says so); otherwise there is none.
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
        ValueError: for a tolerance outside (0, 1), ``confirm < 1``, ``max_runs < 3`` or
            ``trial_time <= 0``.
    """
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be between 0 and 1, got {tolerance}")
    if confirm < 1:
        raise ValueError(f"confirm must be >= 1, got {confirm}")
    if max_runs < 3:
        raise ValueError(f"max_runs must be >= 3, got {max_runs}")
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

    def run(size: int, phase: str) -> Trial:
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
            memory_limit=memory_limit,
            cpus=cpus,
            run_for=trial_time,
        )
        if r.interrupted:
            raise RunInterrupted(r.interrupted)
        return Trial(
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

    # the measuring run and the verification come out of the budget
    search = Search(run, floor, top, tolerance, max_runs - 1 - int(verify), observer)

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
        p = model.prediction
        level = start_level(model, base.peak, tolerance)
        streak = search.from_model(level, p.steady, p.peak, base.peak, confirm)
    else:
        start = max(round_up(int(base.peak * (1 + tolerance)), MiB), round_up(floor + 1, MiB))
        streak = search.from_peak(start, confirm)
    hi, lo = search.hi, search.lo
    if streak == 0 and hi < top:
        basis = f"no size passed {confirm} times in a row within {max_runs} runs (--max-runs)"
        return done(None, basis, no_recommendation(basis, headroom, policy), None)
    minimum = hi
    if streak >= confirm:
        basis = f"{format_iec(minimum)} passed {confirm} times in a row"
    elif hi < top:
        passes = "once, not" if streak == 1 else f"{streak} times in a row, not"
        basis = (
            f"{format_iec(minimum)} passed {passes} {confirm} times in a row: the run budget "
            f"of {max_runs} runs (--max-runs) was spent"
        )
    else:
        # The search climbed back to the ceiling: only the measuring run passed there.
        basis = f"only the ceiling {format_iec(minimum)} passed (the measuring run)"
    if lo > floor:
        basis += f"; {format_iec(lo)} failed"
    if search.noise:
        # not searched again below: passes there are luck (a fast consumer's peak varies)
        basis += f" (a noisy edge: {search.noise}; settled above the highest failure)"
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

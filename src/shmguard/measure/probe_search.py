"""probe's search over trial sizes, apart from the runs: one ``run(size, phase) -> Trial``.

The search keeps a failing end ``lo`` (the highest size that failed: every failure is at or
below it) and a passing end ``hi``, and never reports a size at or below a failure. A job whose
pass/fail near its minimum is noisy (a fast consumer's peak depends on scheduling) is seen by a
non-monotonic result: a failure at or above a size that passed, or a pass at or below one
that failed. The search then settles instead of searching the band again: the next candidate is the
model's next level above ``lo`` (its steady level, then its transient peak) or, without one,
``lo`` plus 2, 4, 8... tolerance steps, and the confirmations go on there. A run budget
(``max_trials``) bounds it all (:func:`shmguard.measure.probe.probe_command`'s ``max_runs``).
"""

from __future__ import annotations

from collections.abc import Callable

from shmguard.measure.probe_result import ProbeObserver, Trial
from shmguard.units import MiB, format_iec, round_up

__all__ = ["Search"]


class Search:
    """The failing (``lo``) and passing (``hi``) ends and the trials run so far.

    Args:
        run: runs the command once at ``size`` bytes for ``phase`` and returns the trial
            (raises to stop the search: an interrupted run).
        lo: bytes assumed to fail (the floor).
        top: the measuring run's tmpfs bytes (it passed there).
        tolerance: the resolution (a fraction of the passing end).
        max_trials: the most trials to run.
        observer: progress receiver, or None.
    """

    def __init__(
        self,
        run: Callable[[int, str], Trial],
        lo: int,
        top: int,
        tolerance: float,
        max_trials: int,
        observer: ProbeObserver | None = None,
    ) -> None:
        self.run = run
        self.lo, self.hi, self.top = lo, 0, top
        self.tolerance = tolerance
        self.max_trials = max_trials
        self.observer = observer
        self.trials: list[Trial] = []
        #: sizes expected to pass (the DataLoader model's levels), ascending
        self.anchors: list[int] = []
        #: why the search settled instead of bisecting, or "" (a non-monotonic result, or the
        #: measured peak failing in a second run)
        self.noise = ""
        self.jumps = 0

    def step(self, size: int) -> int:
        """One tolerance step below/above ``size``: whole MiB, at least 1 MiB."""
        return max(MiB, int(self.tolerance * size) // MiB * MiB)

    def spent(self) -> bool:
        return len(self.trials) >= self.max_trials

    def trial(self, size: int, phase: str) -> bool:
        if self.observer:
            self.observer.trial_started(size, phase, self.lo, self.hi)
        t = self.run(size, phase)
        if not self.noise and phase != "verify":
            if not t.passed and any(p.passed and p.size <= size for p in self.trials):
                self.noise = f"{format_iec(size)} failed after a pass at or below it"
            elif t.passed and any(not p.passed and p.size >= size for p in self.trials):
                self.noise = f"{format_iec(size)} passed after a failure at or above it"
        self.trials.append(t)
        if self.observer:
            self.observer.trial_done(t)
        if not t.passed:
            self.lo = max(self.lo, size)
        return t.passed

    def streak_at(self, size: int) -> int:
        """Passes in a row at ``size`` up to now (the measuring run's at the ceiling)."""
        n = 0
        for t in reversed(self.trials):
            if t.size == size:
                if not t.passed:
                    return n
                n += 1
        return max(n, 1) if size >= self.top else n

    def bound(self, start: int) -> None:
        """Find a passing upper bound from ``start``, raising it by half after each failure."""
        self.hi = start
        while self.hi < self.top and not self.trial(self.hi, "bound"):
            self.hi = min(self.top, round_up(int(self.hi * 1.5), MiB))
            if self.spent():
                break
        if self.hi >= self.top:
            self.hi = self.top  # the measuring run passed here

    def from_model(self, level: int, steady: int, model_peak: int, peak: int, confirm: int) -> int:
        """Search around the model's levels from ``level``
        (:func:`~shmguard.measure.probe.start_level`: the steady level, or the measured
        ``peak`` plus a step when the measuring run stayed clearly below it); see
        :mod:`shmguard.measure.probe`. Returns the passes in a row reached at ``hi``."""
        self.anchors = sorted({a for a in (round_up(steady, MiB), round_up(model_peak, MiB))})
        self.anchors = [a for a in self.anchors if a < self.top]
        from_peak = level < round_up(steady, MiB)
        if self.trial(level, "predict"):
            self.hi = level
            below = level - self.step(level)
            # (the floor is assumed to fail)
            if below > self.lo and not self.spent() and self.trial(below, "bracket"):
                self.hi = below
                if not from_peak:
                    # Less than the level was enough this time: the queues did not fill (a
                    # short run, a fast consumer) or the loader is set lower. Search below it
                    # from the top down; the confirmations decide whether that was luck.
                    self.descend()
                    self.bisect()
                # From the measured peak, a pass at it says the runs' peaks vary: below it
                # passes are luck, and the recommendation covers the measured peak anyway.
            return self.confirm(confirm)
        if from_peak:
            # A second run needed more than the measuring run's peak: this job's peak varies
            # from run to run (a fast consumer). Settle at the model's steady level.
            self.noise = f"{format_iec(level)}, above the measuring run's peak, failed"
            self.hi = self.next_candidate()
            return self.confirm(confirm)
        above = level + self.step(level)
        if above < self.top and not self.spent() and self.trial(above, "bracket"):
            self.hi = above
            return self.confirm(confirm)
        upper = max(
            round_up(model_peak, MiB),
            round_up(int(peak * (1 + self.tolerance)), MiB),
            self.lo + self.step(self.lo),
        )
        self.bound(min(upper, self.top))
        self.bisect()
        return self.confirm(confirm)

    def from_peak(self, start: int, confirm: int) -> int:
        """Without a model: a passing bound from ``start``, bisection below it, confirmations."""
        self.bound(start)
        self.bisect()
        return self.confirm(confirm)

    def descend(self) -> None:
        """Below a passing ``hi`` with nothing failing near: try 2, 4, 8... steps lower until
        a size fails (then :meth:`bisect` narrows it), not a bisection from the floor."""
        k = 1
        while not self.spent():
            size = self.hi - self.step(self.hi) * 2**k
            if size <= self.lo:
                return
            if not self.trial(size, "bisect"):
                return
            self.hi = size
            k += 1

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

    def next_candidate(self) -> int:
        """The size to confirm after ``hi`` failed: the model's next level above ``lo``, else
        one tolerance step above ``lo`` while the results are consistent and 2, 4, 8... steps
        once they are noisy (the band is not searched again)."""
        for a in self.anchors:
            if a > self.lo:
                return a
        if self.noise:
            self.jumps += 1
        return min(self.top, round_up(self.lo + self.step(self.lo) * 2**self.jumps, MiB))

    def confirm(self, confirm: int) -> int:
        """Passes in a row at ``hi`` (earlier passes there count); a failure makes ``hi`` the
        failing end and moves it to :meth:`next_candidate`. Returns the streak reached."""
        streak = self.streak_at(self.hi)
        while streak < confirm and not self.spent() and self.hi < self.top:
            if self.trial(self.hi, "confirm"):
                streak += 1
            else:
                self.hi = self.next_candidate()
                streak = self.streak_at(self.hi)
        return streak

"""The confirmation round: the finalists measured again, in alternation, decided on medians.

One short trial per configuration cannot separate configurations a few percent apart on a
shared machine: on this project's 2-CPU machine the same configuration measured twice a
minute apart gave 510 and 252 samples/s (benchmarks/results/tune_efficiency_2026-12-01.txt),
because other jobs' load comes and goes. So, as a careful person would, the search ends by
re-measuring its finalists (the :data:`FINALISTS` fastest configurations that ran within
:data:`FINALIST_MARGIN` of the fastest, and the cheapest of those) :data:`ROUNDS` times each
in alternation (A B C A B C ...), so that a change of load falls on all of them alike, in one
sandbox of the budget (one process for all).
The pick then compares medians; two configurations of which each was faster in some round
(the difference of their medians is within the noise) and that differ by no more than
:data:`INDISTINCT`, by their medians and round by round, cannot be told apart, and the cheaper
one is recommended.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from shmguard.torch.tuning.model import Trial

#: A configuration within this fraction of the fastest single trial is a finalist: as wide as
#: the noise of one trial here (2x), so that a lucky trial does not leave the others out.
FINALIST_MARGIN = 0.5
#: The most finalists re-measured.
FINALISTS = 3
#: Runs of each finalist in the confirmation round.
ROUNDS = 3
#: The most a configuration that cannot be told apart from the fastest may be slower, by its
#: median and by the median of its per-round ratios to it: the quality target of ``tune``'s
#: benchmark (>= 95% of the best). Winning some round alone let a loader 67% slower by its
#: medians through, on one round's load spike (benchmarks/results/tune_efficiency_2026-12-01.txt,
#: run 9, seed); the per-round ratios alone, one 14% slower by its median (run 10, fits).
INDISTINCT = 0.05


def cost(trial: Trial) -> tuple[int, int, int, bool, bool]:
    """What a configuration costs, to sort by: workers, then prefetch factor, then peak
    /dev/shm, then persistent workers, then pinning."""
    c = trial.config
    return (
        c.num_workers,
        c.prefetch_factor or 0,
        trial.peak_shm or 0,
        c.persistent_workers,
        c.pin_memory,
    )


def finalists(trials: list[Trial] | tuple[Trial, ...]) -> list[Trial]:
    """The trials to re-measure: the :data:`FINALISTS` fastest of those that ran within
    :data:`FINALIST_MARGIN` of the fastest, fastest first, and the cheapest of those when it
    is not among them; empty when fewer than two (nothing to compare)."""
    ok = [t for t in trials if t.ok and t.samples_per_s is not None and not t.repeats]
    if len(ok) < 2:
        return []
    top = max(t.samples_per_s or 0.0 for t in ok)
    close = sorted(
        (t for t in ok if (t.samples_per_s or 0.0) >= top * (1 - FINALIST_MARGIN)),
        key=lambda t: -(t.samples_per_s or 0.0),
    )
    chosen = close[:FINALISTS]
    cheapest = min(close, key=cost)
    if cheapest not in chosen:
        chosen.append(cheapest)  # the one to pick if the others cannot be told from it
    return chosen if len(chosen) > 1 else []


def confirmed(trial: Trial, rates: list[float]) -> Trial:
    """``trial`` with the confirmation's ``rates``: ``samples_per_s`` their median, the search
    trial's figure kept as ``single_samples_per_s``.

    Raises:
        ValueError: ``rates`` is empty or not all positive.
    """
    if not rates or min(rates) <= 0:
        raise ValueError(f"confirmation rates must be positive, got {rates}")
    median = statistics.median(rates)
    return replace(
        trial,
        samples_per_s=median,
        repeats=tuple(rates),
        spread=(max(rates) - min(rates)) / median,
        single_samples_per_s=trial.samples_per_s,
    )


def indistinct(a: Trial, b: Trial) -> bool:
    """True when this machine could not tell ``a`` from the faster ``b``: in the
    confirmation's rounds (each round measures both within seconds, under the same load) each
    was faster in some round, so the difference of their medians is within the noise, and
    ``a``'s median and the median of its per-round ratios to ``b`` are both at least
    ``1 -`` :data:`INDISTINCT` of ``b``'s. Runs not from one confirmation (different counts)
    are compared by range (they overlap) and by their medians. False when either was not
    re-measured."""
    if not a.repeats or not b.repeats:
        return False
    ratio = statistics.median(a.repeats) / statistics.median(b.repeats)
    if len(a.repeats) != len(b.repeats):
        overlap = min(a.repeats) <= max(b.repeats) and min(b.repeats) <= max(a.repeats)
        return overlap and ratio >= 1 - INDISTINCT
    wins = [x >= y for x, y in zip(a.repeats, b.repeats, strict=True)]
    paired = statistics.median(x / y for x, y in zip(a.repeats, b.repeats, strict=True))
    return any(wins) and not all(wins) and min(ratio, paired) >= 1 - INDISTINCT


def verdict(best: Trial | None, chosen: Trial | None, tolerance: float) -> str | None:
    """One sentence on how the confirmation decided, or None when there was none."""
    if best is None or chosen is None or not best.repeats:
        return None
    rounds = len(best.repeats)
    head = f"the finalists were re-measured {rounds} times each in alternation; medians decide"
    if chosen is best:
        return f"{head}: {best.config.label()} is the fastest"
    b, c = best.samples_per_s or 0.0, chosen.samples_per_s or 0.0
    gap = 1 - c / b if b else 0.0
    if gap <= tolerance:
        return (
            f"{head}: {chosen.config.label()} is within {tolerance:.0%} of the fastest "
            f"({best.config.label()}, {gap:.1%} apart) and cheaper"
        )
    pairs = list(zip(chosen.repeats, best.repeats, strict=False))
    wins = sum(x >= y for x, y in pairs)
    ratio = statistics.median(x / y for x, y in pairs)
    return (
        f"{head}: {chosen.config.label()} and {best.config.label()} cannot be told apart "
        f"here (medians {c:,.0f} and {b:,.0f} samples/s, {gap:.0%} apart, but the first was "
        f"as fast in {wins} of {rounds} rounds and at {ratio:.0%} of the second round by "
        f"round (median); spreads {chosen.spread or 0:.0%} and {best.spread or 0:.0%}), so "
        "the cheaper is recommended"
    )

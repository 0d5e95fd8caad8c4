"""The confirmation round's decisions, from trial values (the real-trial tests run it)."""

from __future__ import annotations

import pytest

from shmguard.torch.tuning import Trial, pick
from shmguard.torch.tuning.confirm import confirmed, finalists, indistinct, verdict
from shmguard.torch.tuning.model import config
from shmguard.torch.tuning.search import TOLERANCE
from shmguard.units import MiB


def ok(nw: int, pf: int, rate: float, persistent: bool = False) -> Trial:
    return Trial(config(nw, pf, persistent), "ok", samples_per_s=rate, peak_shm=nw * pf * MiB)


def test_finalists_are_the_fastest_within_the_margin_and_the_cheapest() -> None:
    trials = [
        ok(0, 2, 500.0),  # within 50% of 900, and the cheapest
        ok(1, 2, 880.0),
        ok(2, 2, 900.0),
        ok(2, 1, 890.0),
        ok(2, 4, 400.0),  # 56% slower: not a finalist
        Trial(config(4), "infeasible", "shm-exhausted"),
    ]
    # the three fastest are 900, 890, 880, and the cheapest (nw=0) comes with them
    assert [t.config for t in finalists(trials)] == [
        config(2, 2),
        config(2, 1),
        config(1, 2),
        config(0),
    ]
    # one configuration alone within the margin: nothing to confirm
    assert finalists([ok(0, 2, 100.0), ok(1, 2, 900.0)]) == []
    # a lucky single trial 32% above the next (fits, benchmark run 7) leaves it in
    assert len(finalists([ok(2, 1, 1775.0), ok(2, 4, 1209.0)])) == 2
    assert finalists([ok(1, 2, 900.0)]) == []


def test_confirmed_trial_takes_the_median_and_keeps_the_single_figure() -> None:
    t = confirmed(ok(1, 2, 510.0), [252.0, 300.0, 280.0])
    assert t.samples_per_s == 280.0 and t.single_samples_per_s == 510.0
    assert t.repeats == (252.0, 300.0, 280.0)
    assert t.spread == pytest.approx(48.0 / 280.0)
    with pytest.raises(ValueError, match="positive"):
        confirmed(ok(1, 2, 1.0), [])


def test_rounds_that_disagree_cannot_be_told_apart_and_the_cheaper_is_picked() -> None:
    cheap = confirmed(ok(1, 2, 500.0), [440.0, 530.0, 465.0])  # median 465
    fast = confirmed(ok(2, 2, 520.0), [450.0, 520.0, 480.0])  # median 480: 3% faster
    slow = ok(0, 2, 900.0)  # a lucky single trial: not re-measured, so not eligible
    assert indistinct(cheap, fast) and not indistinct(cheap, slow)
    best, chosen = pick([slow, cheap, fast])
    assert best is fast and chosen is cheap
    text = verdict(best, chosen, TOLERANCE)
    assert text is not None and "cannot be told apart" in text and "3% apart" in text
    # per round 440/450, 530/520, 465/480: at 98% of it by their median
    assert "as fast in 1 of 3 rounds and at 98% of the second round by round" in text


def test_one_lucky_round_does_not_make_a_much_slower_loader_indistinct() -> None:
    # Benchmark run 9, seed: num_workers=0 had one round at 986 samples/s (a load spike),
    # and ran at 46% of the 2-worker loader round by round.
    cheap = confirmed(ok(0, 2, 369.0), [986.0, 201.0, 126.0])
    fast = confirmed(ok(2, 1, 454.0, True), [608.0, 433.0, 739.0])
    assert not indistinct(cheap, fast)
    assert pick([cheap, fast]) == (fast, fast)
    # runs of different counts: their ranges overlap, but the medians are 67% apart
    assert not indistinct(confirmed(cheap, [986.0, 201.0, 126.0, 150.0]), fast)
    assert indistinct(confirmed(cheap, [600.0, 590.0]), fast)
    # benchmark run 10, fits: at 95% of it round by round (1209/1411, 1685/1422, 1022/1073),
    # but 14% slower by the medians: told apart
    cheap = confirmed(ok(0, 2, 1472.0), [1209.0, 1685.0, 1022.0])
    fast = confirmed(ok(2, 2, 1198.0, True), [1411.0, 1422.0, 1073.0])
    assert not indistinct(cheap, fast)
    assert pick([cheap, fast]) == (fast, fast)


def test_slower_in_every_round_is_told_apart_however_wide_the_spread() -> None:
    # Load rose from round to round: both slowed alike, the spreads are wide and the ranges
    # overlap, yet the faster one won every round.
    cheap = confirmed(ok(1, 2, 500.0), [300.0, 150.0, 90.0])
    fast = confirmed(ok(2, 2, 520.0), [420.0, 220.0, 120.0])
    assert not indistinct(cheap, fast)
    assert pick([cheap, fast]) == (fast, fast)


def test_separated_runs_pick_the_faster() -> None:
    cheap = confirmed(ok(1, 2, 500.0), [400.0, 410.0, 405.0])
    fast = confirmed(ok(2, 2, 450.0), [470.0, 480.0, 475.0])
    best, chosen = pick([cheap, fast])
    assert best is chosen is fast
    assert verdict(best, chosen, TOLERANCE) == (
        "the finalists were re-measured 3 times each in alternation; medians decide: "
        "nw=2 pf=2 is the fastest"
    )
    # within the tolerance by medians, the cheaper wins even when the runs do not overlap
    near = confirmed(ok(1, 1, 470.0), [466.0, 467.0, 468.0])
    best, chosen = pick([near, fast])
    assert best is fast and chosen is near
    assert "within 2% of the fastest" in (verdict(best, chosen, TOLERANCE) or "")
    assert verdict(ok(1, 2, 1.0), ok(1, 2, 1.0), TOLERANCE) is None

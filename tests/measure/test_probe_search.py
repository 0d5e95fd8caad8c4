"""probe's search against scripted trial oracles: deterministic jobs, a noisy band, the budget.

No sandbox, no time: each oracle says pass or fail per size (from a seeded random draw in the
noisy band), and the tests check the trials the search asks for, the run count and that what
it settles on is above every size that failed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import pairwise

import pytest

from shmguard.measure.outcome import Outcome
from shmguard.measure.probe_result import Trial
from shmguard.measure.probe_search import Search
from shmguard.units import GiB, MiB

TOP = 4 * GiB


def oracle(passes: Callable[[int], bool]) -> Callable[[int, str], Trial]:
    def run(size: int, phase: str) -> Trial:
        ok = passes(size)
        outcome = Outcome.OK if ok else Outcome.SHM_EXHAUSTED
        return Trial(size, phase, ok, outcome, "", 0 if ok else 1, size, 0.0)

    return run


def at_least(need: int) -> Callable[[int], bool]:
    return lambda size: size >= need


def noisy(low: int, high: int, seed: int) -> Callable[[int], bool]:
    """Fails below ``low``, passes from ``high``; in between passes with a probability rising
    linearly (a fast consumer's edge: its peak depends on scheduling)."""
    rng = random.Random(seed)
    return lambda size: size >= high or (size >= low and rng.random() < (size - low) / (high - low))


def search(passes: Callable[[int], bool], max_trials: int = 14) -> Search:
    return Search(oracle(passes), 0, TOP, 0.05, max_trials)


def shape(s: Search) -> list[tuple[str, int, bool]]:
    return [(t.phase, t.size // MiB, t.passed) for t in s.trials]


def assert_safe(s: Search, streak: int) -> None:
    failed = [t.size for t in s.trials if not t.passed]
    assert s.hi > max(failed, default=0), shape(s)
    assert s.lo == max(failed, default=0)
    assert streak == 0 or s.trials[-1].passed or s.hi >= TOP


# the seed's loader: 4 workers, 18.38 MiB batches, steady 165.49 MiB, peak 183.87 MiB
STEADY, PEAK = int(165.49 * MiB), int(183.87 * MiB)


def test_a_loader_whose_queues_fill_is_six_runs_as_before() -> None:
    s = search(at_least(STEADY))
    streak = s.from_model(166 * MiB, STEADY, PEAK, STEADY, confirm=3)
    assert shape(s) == [
        ("predict", 166, True),
        ("bracket", 158, False),
        ("confirm", 166, True),
        ("confirm", 166, True),
    ]
    assert (streak, s.hi, s.noise) == (3, 166 * MiB, "")


def test_a_deterministic_job_without_a_model_is_bisected_as_before() -> None:
    s = search(at_least(40 * MiB))
    streak = s.from_peak(42 * MiB, confirm=3)
    assert shape(s) == [
        ("bound", 42, True),
        ("bisect", 21, False),
        ("bisect", 32, False),
        ("bisect", 37, False),
        ("bisect", 40, True),
        ("bisect", 39, False),
        ("confirm", 40, True),
        ("confirm", 40, True),
    ]
    assert (streak, s.hi, s.noise) == (3, 40 * MiB, "")


def test_a_short_run_below_the_model_descends_instead_of_bisecting_from_the_floor() -> None:
    # the queues never fill: 120 MiB is enough, deterministically
    s = search(at_least(120 * MiB))
    streak = s.from_model(166 * MiB, STEADY, PEAK, STEADY, confirm=3)
    assert shape(s)[:4] == [
        ("predict", 166, True),
        ("bracket", 158, True),
        ("bisect", 144, True),  # 2 steps below
        ("bisect", 116, False),  # 4 steps below: fails, then bisection between
    ]
    assert streak == 3 and 120 * MiB <= s.hi <= 126 * MiB and s.noise == ""
    assert len(s.trials) <= 10
    assert_safe(s, streak)


def test_the_measured_peak_failing_settles_at_the_steady_level() -> None:
    # numpy_loader --batches 10, fast consumer: measured peak 92 MiB, start 97 MiB, and runs
    # pass or fail by luck between 116 and 145 MiB
    for seed in range(200):
        s = search(noisy(116 * MiB, 145 * MiB, seed))
        streak = s.from_model(97 * MiB, STEADY, PEAK, 92 * MiB, confirm=3)
        assert shape(s) == [
            ("predict", 97, False),
            ("confirm", 166, True),
            ("confirm", 166, True),
            ("confirm", 166, True),
        ]
        assert streak == 3 and s.noise.startswith("97 MiB, above the measuring run's peak")
        assert_safe(s, streak)


@pytest.mark.parametrize("start", [110, 120, 130, 140])
def test_a_noisy_band_settles_within_the_budget(start: int) -> None:
    counts = []
    for seed in range(300):
        s = search(noisy(100 * MiB, 150 * MiB, seed))
        streak = s.from_model(start * MiB, STEADY, PEAK, (start - 5) * MiB, confirm=3)
        counts.append(len(s.trials))
        assert_safe(s, streak)
        assert streak == 3, shape(s)
        assert s.hi <= 166 * MiB  # never past the model's steady level: it always passes
        # a failure after a pass: settled, no second bisection
        if s.noise:
            last_bisect = max(i for i, t in enumerate(s.trials) if t.phase != "confirm")
            assert all(t.phase == "confirm" for t in s.trials[last_bisect + 1 :])
    # at most 7 trials: 9 runs with the measuring run and the verification
    assert max(counts) <= 7, sorted(counts)


def test_from_the_measured_peak_nothing_below_it_is_searched() -> None:
    # a fast consumer that happened to pass at its measured peak (110 MiB) and a step below
    s = search(at_least(90 * MiB))
    streak = s.from_model(116 * MiB, STEADY, PEAK, 110 * MiB, confirm=3)
    assert shape(s) == [
        ("predict", 116, True),
        ("bracket", 111, True),
        ("confirm", 111, True),
        ("confirm", 111, True),
    ]
    assert (streak, s.noise) == (3, "")


def test_without_a_model_a_noisy_band_is_climbed_in_growing_steps() -> None:
    for seed in range(300):
        s = search(noisy(30 * MiB, 60 * MiB, seed))
        streak = s.from_peak(32 * MiB, confirm=3)
        assert_safe(s, streak)
        assert len(s.trials) <= 14
        sizes = [t.size for t in s.trials if t.phase == "confirm"]
        gaps = [b - a for a, b in pairwise(sizes) if b > a]
        assert gaps == sorted(gaps), shape(s)  # each jump at least as large as the last


def test_the_budget_bounds_a_job_that_never_passes_reliably() -> None:
    flip = iter([True, False] * 100)
    s = search(lambda size: size >= 10 * MiB and next(flip), max_trials=12)
    streak = s.from_peak(11 * MiB, confirm=3)
    assert len(s.trials) == 12
    assert streak < 3
    assert_safe(s, streak)


def test_a_pass_below_a_failure_is_noise() -> None:
    results = iter([False, True])
    s = search(lambda size: next(results))
    s.trial(50 * MiB, "bound")
    assert s.noise == ""
    s.trial(40 * MiB, "bisect")
    assert s.noise == "40 MiB passed after a failure at or above it"
    assert s.lo == 50 * MiB  # the highest failure stays the failing end


def test_the_cli_default_budget_is_the_library_default() -> None:
    import inspect

    from shmguard.cli.probe import probe
    from shmguard.measure.probe import MAX_RUNS, probe_command

    assert inspect.signature(probe).parameters["max_runs"].default.default == MAX_RUNS
    assert inspect.signature(probe_command).parameters["max_runs"].default == MAX_RUNS

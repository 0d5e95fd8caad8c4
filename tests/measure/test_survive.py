"""``--trial-time``'s survival rule: a run stopped at its trial time passes only once /dev/shm is
steady, and a run that has not used /dev/shm at all yet is still starting, not steady.

The CI failure this answers: ``probe --trial-time 2s`` on a PyTorch loader whose ``import torch``
took longer than 2 s on a loaded machine was stopped at a peak of 0 B, passed, and the probe
reported a 1 MiB minimum for a loader that needs ~16 MiB.
"""

from __future__ import annotations

import pytest

from shmguard.measure.run import measure_command
from shmguard.measure.survive import SurvivalCheck, first_use_wait, settle_time
from shmguard.units import MiB


class _Sampler:
    """The two readings SurvivalCheck takes from a sampler, set by the test."""

    def __init__(self) -> None:
        self.peak = 0
        self.quiet = 0.0

    def since_peak(self) -> float:
        return self.quiet


class _Detector:
    def __init__(self) -> None:
        self.is_full = False

    def full(self) -> bool:
        return self.is_full


def _check(run_for: float) -> tuple[SurvivalCheck, _Sampler, _Detector, list[float]]:
    now = [100.0]
    sampler, detector = _Sampler(), _Detector()
    check = SurvivalCheck(sampler, detector, run_for, clock=lambda: now[0])  # type: ignore[arg-type]
    check.begin()
    return check, sampler, detector, now


def test_waits_for_a_first_use_of_shm_before_calling_a_run_steady() -> None:
    check, sampler, _, now = _check(2.0)
    sampler.quiet = 5.0  # nothing ever happened on /dev/shm
    now[0] += 2.5
    assert not check.due()  # past run_for, but still starting
    now[0] += first_use_wait(2.0) - 2.5 - 0.1
    assert not check.due()
    now[0] += 0.2
    assert check.due()  # a job that never uses /dev/shm is stopped after all


def test_a_run_that_used_shm_is_due_at_run_for_once_steady() -> None:
    check, sampler, detector, now = _check(2.0)
    sampler.peak = 16 * MiB
    now[0] += 1.9
    sampler.quiet = 10.0
    assert not check.due()  # not yet run_for
    now[0] += 0.2
    sampler.quiet = settle_time(2.0) - 0.1
    assert not check.due()  # the peak rose too recently
    sampler.quiet = settle_time(2.0)
    assert check.due()
    detector.is_full = True
    assert not check.due()  # full is not steady


@pytest.mark.parametrize(("run_for", "wait"), [(0.5, 10.5), (2.0, 12.0), (5.0, 15.0), (30.0, 90.0)])
def test_first_use_wait(run_for: float, wait: float) -> None:
    assert first_use_wait(run_for) == wait


def test_a_slow_start_is_not_stopped_at_zero(root_only: None, no_leftovers: None) -> None:
    # Sleeps past its trial time before it touches /dev/shm (an import that takes 2 s), then
    # holds 4 MiB forever: the run is stopped only after the 4 MiB, and that is its peak.
    r = measure_command(
        ["sh", "-c", "sleep 2; head -c 4194304 /dev/zero > /dev/shm/x && exec sleep infinity"],
        shm_size=16 * MiB,
        run_for=0.5,
        timeout=60,
        output="capture",
    )
    assert r.stopped_by == "trial-time"
    assert r.survived and r.passed
    assert r.peak == 4 * MiB
    assert 2.0 < r.wall_time < 30

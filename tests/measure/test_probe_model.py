"""probe from the DataLoader model: real PyTorch 2.13 loaders in real small tmpfs.

The loaders run long enough (30 and 25 batches, 0.1 s of fake training each) for their queues
to fill, so the minimum is the model's deterministic steady level and the size one step below
always fails: fits_loader 9 x (4.59 MiB + 1 page) + 20 pages = 41.46 MiB -> 42 MiB (probed
41-42 MiB before the model: docs/probe.md), dict_loader 7 x (3 MiB + 1 page) + 14 pages =
21.08 MiB -> 22 MiB. A 10-batch run does not always fill them, and then sizes below the level
pass by luck: the search then needs more runs (benchmarks/probe_cost.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shmguard.measure.probe import probe_command
from shmguard.units import MiB

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FITS = ROOT / "src" / "shmguard" / "examples" / "fits_loader.py"
DICTS = ROOT / "tests" / "fixtures" / "measure" / "dict_loader.py"


@pytest.mark.timeout(240)
def test_bundled_example_in_six_runs(root_only: None, no_leftovers: None) -> None:
    argv = [sys.executable, str(FITS), "--quiet", "--batches", "30", "--step-time", "0.1"]
    result = probe_command(argv, hang_after=3.0)
    seen = result.model
    assert seen is not None, result.start_basis
    assert (seen.workers, seen.batch_bytes, seen.prefetch_factor) == (4, 32 * 3 * 224 * 224, 2)
    assert result.minimum == 42 * MiB, [(t.phase, t.size, t.passed) for t in result.trials]
    assert result.minimum_basis == "42 MiB passed 3 times in a row; 40 MiB failed"
    assert [(t.phase, t.size // MiB, t.passed) for t in result.trials] == [
        ("predict", 42, True),
        ("bracket", 40, False),
        ("confirm", 42, True),
        ("confirm", 42, True),
        ("verify", 64, True),
    ]
    assert result.runs == 6
    assert result.verified is True
    # the model's 46.05 MiB peak (above the 42 MiB minimum) + 25% = 57.57 MiB, rounded up
    assert result.recommendation.shm_size == 64 * MiB


@pytest.mark.timeout(240)
def test_a_new_job_with_another_prefetch_factor_in_six_runs(
    root_only: None, no_leftovers: None
) -> None:
    result = probe_command([sys.executable, str(DICTS), "--batches", "25"], hang_after=3.0)
    seen = result.model
    assert seen is not None, result.start_basis
    # Not seen directly: the measured peak is above the default prefetch_factor's levels.
    assert (seen.workers, seen.batch_bytes, seen.prefetch_factor) == (2, 64 * 3 * 128 * 128, 3)
    assert result.minimum == 22 * MiB, [(t.phase, t.size, t.passed) for t in result.trials]
    assert result.runs <= 6
    assert result.verified is True
    assert result.pass_rates[0].size == 21 * MiB and result.pass_rates[0].passes == 0


@pytest.mark.timeout(120)
def test_a_loader_that_never_ends_passes_by_surviving(root_only: None, no_leftovers: None) -> None:
    argv = [sys.executable, str(DICTS), "--batches", "5", "--forever"]
    result = probe_command(argv, hang_after=3.0, trial_time=2.0, confirm=1)
    assert result.trial_time == 2.0
    assert result.measure.survived
    # 5 batches an epoch: at most 5 in flight, 15.07 MiB with the semaphores.
    assert result.minimum is not None and 16 * MiB <= result.minimum <= 19 * MiB
    assert result.verified is True
    assert all(t.survived for t in result.trials if t.passed)
    assert result.survived == sum(t.passed for t in result.trials) + 1

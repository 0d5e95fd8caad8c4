"""The DataLoader model applied to what a measuring run saw (probe's starting point)."""

from __future__ import annotations

import pytest

from shmguard.estimate import LoaderSpec, padded_bytes, predict
from shmguard.estimate.observed import observed_loader
from shmguard.units import MiB

#: The seed's loader: 32 float32 3x224x224 images per batch, 4 workers (torch_shm.md S01).
SEED_BATCH = 32 * 3 * 224 * 224 * 4


@pytest.mark.parametrize(
    "peak_mib",
    [
        110.35,  # 6 batches: a 10-batch run whose queues did not fill
        147.11,  # 8 batches: a fast consumer (torch_shm.md section 4)
        165.49,  # 9 batches: the slow consumer's steady level
        183.87,  # 10 batches: the transient peak
    ],
)
def test_seed_loader_peaks_all_give_the_default_prefetch_factor(peak_mib: float) -> None:
    seen = observed_loader(4, SEED_BATCH, int(peak_mib * MiB))
    assert seen is not None
    assert seen.prefetch_factor == 2
    # B' = the batch in whole pages + one labels page; steady = 9 B' + 20 semaphore pages:
    # 173,527,040 B, the measured deterministic edge of 165.49 MiB (torch_shm.md section 4).
    assert seen.spec.batch_pages == SEED_BATCH + 4096
    assert seen.prediction.steady == 173_527_040
    assert seen.prediction.peak == 173_527_040 + SEED_BATCH + 4096


def test_a_peak_above_the_default_levels_picks_a_larger_prefetch_factor() -> None:
    # tests/fixtures/measure/dict_loader.py: 2 workers, prefetch_factor 3, 3 MiB batches;
    # its measuring runs peaked at its steady level, 7 x (3 MiB + 1 labels page) + 14
    # semaphore pages = 22,106,112 B.
    batch = 64 * 3 * 128 * 128
    seen = observed_loader(2, batch, 22_106_112)
    assert seen is not None
    assert seen.prefetch_factor == 3
    assert seen.prediction.steady == predict(LoaderSpec(padded_bytes((batch, 0)), 2, 3)).steady
    assert seen.prediction.steady == 22_106_112
    assert "prefetch_factor 3" in seen.basis and "2 worker(s)" in seen.basis


def test_a_peak_beyond_every_prefetch_factor_takes_the_largest() -> None:
    seen = observed_loader(1, MiB, 10_000 * MiB)
    assert seen is not None and seen.prefetch_factor == 64


@pytest.mark.parametrize(("workers", "batch"), [(0, SEED_BATCH), (4, 0)])
def test_no_dataloader_seen(workers: int, batch: int) -> None:
    assert observed_loader(workers, batch, 100 * MiB) is None


def test_negative_input_is_refused() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        observed_loader(-1, SEED_BATCH, 0)

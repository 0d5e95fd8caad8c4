"""The calibration loader's declared batch is the batch torch really collates."""

from __future__ import annotations

import pytest

from shmguard.estimate import padded_bytes
from shmguard.examples.grid_loader import (
    batch_storages,
    make_sample,
    parse_args,
    sample_elements,
)

torch = pytest.importorskip("torch")


def _storages(batch: object) -> list[int]:
    if isinstance(batch, torch.Tensor):
        return [batch.untyped_storage().nbytes()]
    if isinstance(batch, dict):
        return [n for v in batch.values() for n in _storages(v)]
    if isinstance(batch, list | tuple):
        return [n for v in batch for n in _storages(v)]
    return []  # strings collate to a list of str: no storage


@pytest.mark.parametrize("returns", ["tensor", "dict", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_declared_storages_match_default_collate(returns: str, dtype: str) -> None:
    from torch.utils.data import default_collate

    n = sample_elements(5, dtype, 32)
    batch = default_collate([make_sample(i, n, dtype, returns) for i in range(32)])
    assert _storages(batch) == batch_storages(5, dtype, returns)
    assert batch_storages(5, dtype, returns)[0] == 5 * 2**20


def test_seed_shape_and_default_batches() -> None:
    # 18.375 MiB of float32 in 32 samples is 3x224x224 each: the seed's batch.
    assert sample_elements(18.375, "float32", 32) == 3 * 224 * 224
    assert padded_bytes(batch_storages(18.375, "float32", "tensor")) == 19_271_680
    assert parse_args(["--workers", "8", "--prefetch", "4"]).batches == 2 * 32 + 16
    with pytest.raises(ValueError, match="unknown return kind"):
        batch_storages(1, "float32", "list")

"""The basis a batch size is given with says when the batches were made: before the workers
start (``check_dataloader``) or after the guard stopped them (its failure report)."""

from __future__ import annotations

from shmguard.torch.sizing import BatchSizing
from shmguard.units import PAGE_SIZE


def test_batches_made_before_any_worker_say_so() -> None:
    sizing = BatchSizing(PAGE_SIZE, PAGE_SIZE, 3, "batches", 1)
    assert sizing.basis == (
        "the largest of 3 batches made before the workers start, all the same size"
    )
    assert BatchSizing(PAGE_SIZE, PAGE_SIZE, 1).basis == "one batch made before the workers start"


def test_batches_made_after_the_guard_stopped_the_workers_say_so() -> None:
    sizing = BatchSizing(3 * PAGE_SIZE, PAGE_SIZE, 3, "batches", 1, after_stop=True)
    assert sizing.basis == (
        "the largest of 3 batches made after the workers were stopped, "
        "sizes 4 KiB to 12 KiB: variable-size data"
    )
    one = BatchSizing(PAGE_SIZE, PAGE_SIZE, 1, after_stop=True)
    assert one.basis == "one batch made after the workers were stopped"

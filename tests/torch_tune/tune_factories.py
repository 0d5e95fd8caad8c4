"""Factories the tune tests tune (imported by the trials: this folder is on sys.path).

Small batches (1 MiB of float32, 8 samples) keep each trial to a few seconds on 2 CPUs.
"""

from __future__ import annotations

from typing import Any

from shmguard.examples import grid_loader

#: MiB per batch of :func:`small`.
BATCH_MIB = 1.0


def small(
    num_workers: int = 0,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
) -> Any:
    """The grid loader with 1 MiB batches of 8 samples, 40 batches an epoch."""
    return grid_loader.loader(
        num_workers,
        prefetch_factor,
        persistent_workers,
        pin_memory,
        batch_mib=BATCH_MIB,
        batch_size=8,
        batches=40,
    )


def raises(**kwargs: Any) -> Any:
    """A factory whose code is broken."""
    raise RuntimeError("dataset path /data/train does not exist")


def not_a_loader(**kwargs: Any) -> Any:
    """A factory that returns the dataset instead of the loader."""
    return [1, 2, 3]


def fixed_workers(**kwargs: Any) -> Any:
    """A factory that ignores the num_workers it is given."""
    kwargs["num_workers"] = 4
    return small(**kwargs)

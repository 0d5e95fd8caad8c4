"""A typical image-classification DataLoader: 3x224x224 float32, batch 32, 4 workers.

One batch is 32 * 3 * 224 * 224 * 4 B = 18.4 MiB of /dev/shm; 4 workers x prefetch 2 keep 8 in
flight, plus the one in the training loop's hands: about 165 MiB. In Docker's default 64 MiB it
crashes with ``unable to allocate shared memory(shm)`` (or, on about 5% of runs, hangs).

    python examples/seed_loader.py [--batches N] [--step-time S]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the sibling helper importable
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import build_loader, parse_args, run  # type: ignore[import-not-found]
else:
    from shmguard.examples._common import build_loader, parse_args, run


def sample(i: int) -> tuple[Any, int]:
    """Item ``i``: a random 3x224x224 float32 image and an int label."""
    import torch

    return torch.rand(3, 224, 224), i % 1000


def loader(
    num_workers: int = 4,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
    *,
    batch_size: int = 32,
    batches: int = 50,
) -> Any:
    """This example's DataLoader as a factory for ``shmguard tune --loader
    shmguard.examples.seed_loader:loader``: ``batches`` batches of ``batch_size``
    3x224x224 float32 images."""
    return build_loader(
        sample,
        batches=batches,
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers,
        pin_memory=pin_memory,
    )


def main(argv: list[str] | None = None) -> None:
    """Run the loader."""
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "", argv)
    run(args, sample, args.batch_size * 3 * 224 * 224 * 4)


if __name__ == "__main__":
    main()

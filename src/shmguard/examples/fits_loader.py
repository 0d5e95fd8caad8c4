"""The image-classification loader configured to fit Docker's default 64 MiB /dev/shm.

Images cross the process boundary as uint8 (what a JPEG decodes to) and become float32 only in
the training process: 4.6 MiB per batch instead of 18.4 MiB, so 4 workers x prefetch 2 + 1 batch
need about 42 MiB (probed: 41 MiB with 0.1 s of fake training per batch; torch_shm.md S06).

    python examples/fits_loader.py [--batches N] [--step-time S]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import build_loader, parse_args, run  # type: ignore[import-not-found]
else:
    from shmguard.examples._common import build_loader, parse_args, run


def sample(i: int) -> tuple[Any, int]:
    """Item ``i``: a random 3x224x224 uint8 image and an int label."""
    import torch

    return torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8), i % 1000


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
    shmguard.examples.fits_loader:loader``: ``batches`` batches of ``batch_size``
    3x224x224 uint8 images."""
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
    run(args, sample, args.batch_size * 3 * 224 * 224)


if __name__ == "__main__":
    main()

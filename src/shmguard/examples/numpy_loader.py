"""A DataLoader whose dataset returns numpy arrays (float32 3x224x224, batch 32, 4 workers).

Default collate turns each numpy array into a tensor and stacks the batch straight into shared
memory, so the /dev/shm need is the same as seed_loader's (about 165 MiB) and it fails the same way
in 64 MiB (torch_shm.md, scenario S08).

    python examples/numpy_loader.py [--batches N] [--step-time S]
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
    """Item ``i``: a 3x224x224 float32 numpy array (seeded by ``i``) and an int label."""
    import numpy as np

    return np.random.default_rng(i).random((3, 224, 224), dtype=np.float32), i % 1000


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
    shmguard.examples.numpy_loader:loader``: ``batches`` batches of ``batch_size``
    3x224x224 float32 numpy arrays."""
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
    import numpy as np

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "", argv)
    rng = np.random.default_rng(0)

    def main_sample(i: int) -> tuple[object, int]:
        return rng.random((3, 224, 224), dtype=np.float32), i % 1000

    run(args, main_sample, args.batch_size * 3 * 224 * 224 * 4)


if __name__ == "__main__":
    main()

"""A DataLoader whose dataset returns numpy arrays (float32 3x224x224, batch 32, 4 workers).

Default collate turns each numpy array into a tensor and stacks the batch straight into shared
memory, so the /dev/shm need is the same as seed_loader's (about 165 MiB) and it fails the same way
in 64 MiB (torch_shm.md, scenario S08).

    python examples/numpy_loader.py [--batches N] [--step-time S]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import parse_args, run  # type: ignore[import-not-found]
else:
    from shmguard.examples._common import parse_args, run


def main(argv: list[str] | None = None) -> None:
    """Run the loader."""
    import numpy as np

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "", argv)
    rng = np.random.default_rng(0)

    def sample(i: int) -> tuple[object, int]:
        return rng.random((3, 224, 224), dtype=np.float32), i % 1000

    run(args, sample, args.batch_size * 3 * 224 * 224 * 4)


if __name__ == "__main__":
    main()

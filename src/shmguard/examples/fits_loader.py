"""The image-classification loader configured to fit Docker's default 64 MiB /dev/shm.

Images cross the process boundary as uint8 (what a JPEG decodes to) and become float32 only in
the training process: 4.6 MiB per batch instead of 18.4 MiB, so 4 workers x prefetch 2 + 1 batch
need about 42 MiB (probed: 41 MiB with 0.1 s of fake training per batch; torch_shm.md S06).

    python examples/fits_loader.py [--batches N] [--step-time S]
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
    import torch

    args = parse_args(__doc__.splitlines()[0] if __doc__ else "", argv)

    def sample(i: int) -> tuple[torch.Tensor, int]:
        return torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8), i % 1000

    run(args, sample, args.batch_size * 3 * 224 * 224)


if __name__ == "__main__":
    main()

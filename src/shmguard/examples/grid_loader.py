"""A parameterised DataLoader for calibrating the shm model (benchmarks/plan_calibration.py).

A map-style dataset whose collated batch has a known size: ``--batch-size`` samples (default
32) of ``--dtype`` elements that together make ``--batch-mib`` MiB (rounded down to whole
elements per sample), returned as a tensor, a numpy array or a dict, with an int label.
:func:`batch_storages` gives the storages of one collated batch in bytes, the ``B'`` that
:func:`shmguard.estimate.padded_bytes` rounds to pages. A slow consumer sleeps
``--step-time`` (default 0.15 s) per batch so the prefetch queues fill; a fast one does no
work. ``--del-batch`` drops each batch at the end of the loop body.

    python -m shmguard.examples.grid_loader --workers 4 --prefetch 2 --batch-mib 5 \\
        --dtype float32 --returns dict --consumer slow [--batches 30]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from typing import Any

#: Bytes per element of the dtypes the loader makes.
ITEMSIZE = {"float32": 4, "uint8": 1}
#: Elements of the dict return's uint8 mask field (collated: batch_size x 64 bytes).
MASK_ELEMENTS = 64
RETURNS = ("tensor", "dict", "numpy")


def sample_elements(batch_mib: float, dtype: str, batch_size: int) -> int:
    """Elements of one sample so that ``batch_size`` samples make ``batch_mib`` MiB (at least 1).

    Raises:
        ValueError: for an unknown dtype or a size or batch size <= 0.
    """
    if dtype not in ITEMSIZE:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(ITEMSIZE)}")
    if batch_mib <= 0 or batch_size < 1:
        raise ValueError("batch MiB must be > 0 and batch size >= 1")
    return max(1, int(batch_mib * 2**20) // (batch_size * ITEMSIZE[dtype]))


def batch_storages(batch_mib: float, dtype: str, returns: str, batch_size: int = 32) -> list[int]:
    """``nbytes`` of every storage in one default-collated batch: the data field, for ``dict``
    the uint8 mask, and the int64 labels (a ``dict``'s string field collates to a list and
    takes no shm).

    Raises:
        ValueError: for an unknown dtype or return kind, or a size <= 0.
    """
    if returns not in RETURNS:
        raise ValueError(f"unknown return kind {returns!r}; expected one of {', '.join(RETURNS)}")
    n = sample_elements(batch_mib, dtype, batch_size)
    out = [batch_size * n * ITEMSIZE[dtype]]
    if returns == "dict":
        out.append(batch_size * MASK_ELEMENTS)
    out.append(batch_size * 8)
    return out


def make_sample(i: int, n: int, dtype: str, returns: str) -> Any:
    """Sample ``i``: ``n`` elements of ``dtype`` as a tensor or numpy array with an int label,
    or a dict (``image`` tensor, uint8 numpy ``mask``, int ``label``, str ``path``)."""
    import numpy as np
    import torch

    if returns == "numpy":
        return np.full(n, i % 200, dtype=dtype), i
    data = torch.full((n,), i % 200, dtype=getattr(torch, dtype))
    if returns == "dict":
        mask = np.full(MASK_ELEMENTS, i % 2, dtype=np.uint8)
        return {"image": data, "mask": mask, "label": i, "path": f"sample-{i}.bin"}
    return data, i


def loader(
    num_workers: int = 4,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
    *,
    batch_mib: float = 5.0,
    dtype: str = "float32",
    returns: str = "tensor",
    batch_size: int = 32,
    batches: int = 30,
) -> Any:
    """The grid's DataLoader as a factory for ``shmguard tune --loader
    shmguard.examples.grid_loader:loader``: ``batches`` batches of ``batch_mib`` MiB.

    Raises:
        ValueError: for an unknown dtype or return kind, or a size <= 0.
    """
    from shmguard.examples._common import build_loader

    batch_storages(batch_mib, dtype, returns, batch_size)  # validates the arguments
    n = sample_elements(batch_mib, dtype, batch_size)
    return build_loader(
        functools.partial(make_sample, n=n, dtype=dtype, returns=returns),
        batches=batches,
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers,
        pin_memory=pin_memory,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The loader's options (see the module docstring)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--workers", type=int, default=4, help="num_workers (default 4)")
    p.add_argument("--prefetch", type=int, default=2, help="prefetch_factor (default 2)")
    p.add_argument("--batch-mib", type=float, default=5.0, help="MiB per batch (default 5)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per batch (default 32)")
    p.add_argument("--dtype", choices=sorted(ITEMSIZE), default="float32")
    p.add_argument("--returns", choices=RETURNS, default="tensor")
    p.add_argument("--consumer", choices=("slow", "fast"), default="slow")
    p.add_argument("--step-time", type=float, default=0.15, help="slow consumer's s per batch")
    p.add_argument("--batches", type=int, default=0, help="default: 2 x workers x prefetch + 16")
    p.add_argument("--del-batch", action="store_true", help="`del batch` at the end of the body")
    args = p.parse_args(argv)
    if args.workers < 1 or args.prefetch < 1 or args.batch_size < 1 or args.batches < 0:
        p.error("--workers, --prefetch and --batch-size must be >= 1, --batches >= 0")
    if args.batch_mib <= 0:
        p.error("--batch-mib must be > 0")
    if not args.batches:
        args.batches = 2 * args.workers * args.prefetch + 16
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the loader and print one summary line."""
    import warnings

    from torch.utils.data import DataLoader, Dataset

    args = parse_args(argv)
    # torch warns when num_workers exceeds the CPUs; the grid's 8 workers are the point here.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    n = sample_elements(args.batch_mib, args.dtype, args.batch_size)

    class Grid(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return int(args.batches * args.batch_size)

        def __getitem__(self, i: int) -> Any:
            return make_sample(i, n, args.dtype, args.returns)

    loader = DataLoader(
        Grid(), batch_size=args.batch_size, num_workers=args.workers, prefetch_factor=args.prefetch
    )
    t0 = time.monotonic()
    count = 0
    for batch in loader:
        count += 1
        if args.consumer == "slow":
            time.sleep(args.step_time)
        if args.del_batch:
            del batch
    print(f"done: {count} batches in {time.monotonic() - t0:.2f} s", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

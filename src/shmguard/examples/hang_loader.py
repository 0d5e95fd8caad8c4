"""A DataLoader that always hangs when /dev/shm is too small: one 24 MiB array per item.

``batch_size=None`` and a numpy array per item (torch_shm.md section 2, scenario S09): nothing
is allocated in collate, so every shm allocation happens in a worker's queue feeder thread while
the batch is pickled. When one fails, Python's feeder prints the traceback and drops the batch,
and the main process waits for it forever (4 workers need about 200 MiB; 64 MiB holds two
items). With ``--guard`` the loop runs under :func:`shmguard.torch.guard`, which turns the hang
into ``ShmExhaustedError``.

    python -m shmguard.examples.hang_loader [--guard] [--stall-after S] [--items N]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (defaults: the S09 scenario)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("--items", type=int, default=40, help="items to load (default 40)")
    p.add_argument("--item-mib", type=float, default=24.0, help="MiB per item (default 24)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader num_workers (default 4)")
    p.add_argument("--timeout", type=float, default=0.0, help="DataLoader(timeout=...) seconds")
    p.add_argument("--guard", action="store_true", help="iterate under shmguard.torch.guard")
    p.add_argument(
        "--stall-after", type=float, default=5.0, help="the guard's stall time (default 5 s)"
    )
    return p.parse_args(argv)


def make_loader(args: argparse.Namespace) -> Any:
    """The hanging DataLoader."""
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    n = int(args.item_mib * 2**20) // 4

    class Big(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return int(args.items)

        def __getitem__(self, i: int) -> Any:
            return np.full((n,), float(i), dtype=np.float32)

    return DataLoader(Big(), batch_size=None, num_workers=args.workers, timeout=args.timeout)


def main(argv: list[str] | None = None) -> None:
    """Run the loader."""
    args = parse_args(argv)
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    loader: Any = make_loader(args)
    if args.guard:
        from shmguard.torch import guard

        loader = guard(loader, stall_after=args.stall_after)
    n = 0
    for n, _item in enumerate(loader, 1):
        print(f"item {n}", flush=True)
    print(f"done: {n} items", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

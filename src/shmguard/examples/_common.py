"""Shared command line and loop of the bundled examples (imported only by them)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The examples' common options; defaults are the seed's configuration."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batches", type=int, default=50, help="batches to load (default 50)")
    p.add_argument("--batch-size", type=int, default=32, help="samples per batch (default 32)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader num_workers (default 4)")
    p.add_argument("--prefetch-factor", type=int, default=2, help="default 2")
    p.add_argument(
        "--step-time", type=float, default=0.0, help="seconds of fake training per batch"
    )
    p.add_argument(
        "--timeout", type=float, default=0.0, help="DataLoader(timeout=...) in seconds (0: none)"
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary line")
    p.add_argument(
        "--check",
        choices=("off", "raise", "warn", "adapt"),
        default="off",
        help="run shmguard.torch.check_dataloader with this action first (default off)",
    )
    p.add_argument("--guard", action="store_true", help="iterate under shmguard.torch.guard")
    return p.parse_args(argv)


def build_loader(
    make_sample: Callable[[int], Any],
    *,
    batches: int,
    batch_size: int,
    num_workers: int,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
    timeout: float = 0.0,
) -> Any:
    """A DataLoader over ``make_sample(i)``, ``batches`` batches of ``batch_size`` long.

    ``prefetch_factor`` and ``persistent_workers`` apply only with workers (torch refuses
    them with ``num_workers=0``), so a factory can pass whatever it is given.
    """
    import warnings

    from torch.utils.data import DataLoader, Dataset

    # torch warns when num_workers exceeds the CPUs; the seed's 4 workers are the point here.
    warnings.filterwarnings("ignore", message="This DataLoader will create")

    class Synthetic(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return int(batches * batch_size)

        def __getitem__(self, i: int) -> Any:
            return make_sample(i)

    return DataLoader(
        Synthetic(),
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=(prefetch_factor or 2) if num_workers > 0 else None,
        persistent_workers=persistent_workers and num_workers > 0,
        pin_memory=pin_memory,
        timeout=timeout,
    )


def make_loader(args: argparse.Namespace, make_sample: Callable[[int], Any]) -> Any:
    """The examples' DataLoader over ``make_sample(i)``, ``args.batches`` batches long."""
    return build_loader(
        make_sample,
        batches=args.batches,
        batch_size=args.batch_size,
        num_workers=args.workers,
        prefetch_factor=args.prefetch_factor,
        timeout=args.timeout,
    )


def run(
    args: argparse.Namespace,
    make_sample: Callable[[int], Any],
    batch_bytes: int,
) -> None:
    """Iterate a DataLoader over ``make_sample(i)`` for ``args.batches`` batches (first through
    ``check_dataloader`` and under ``guard`` when ``--check``/``--guard`` ask for it)."""
    loader = make_loader(args, make_sample)
    if args.check != "off":
        from shmguard.torch import check_dataloader

        loader = check_dataloader(loader, action=args.check)
    if args.guard:
        from shmguard.torch import guard

        loader = guard(loader)
    print(
        f"loading {args.batches} batches of {batch_bytes / 2**20:.1f} MiB with "
        f"num_workers={loader.num_workers} prefetch_factor={loader.prefetch_factor}",
        flush=True,
    )
    t0 = time.monotonic()
    n = 0
    for n, _batch in enumerate(loader, 1):
        if args.step_time:
            time.sleep(args.step_time)
        if not args.quiet and (n % 10 == 0 or n == args.batches):
            print(f"batch {n}/{args.batches}", flush=True)
    print(f"done: {n} batches in {time.monotonic() - t0:.1f} s", flush=True)
    sys.stdout.flush()

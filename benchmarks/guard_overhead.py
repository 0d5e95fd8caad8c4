"""Per-batch cost of ``shmguard.torch.guard``: guarded against bare iteration of the same real
DataLoader, in the same process, epochs alternated. Target (issue 9): below 1%.

Two loaders, both with persistent workers (so an epoch measures batches, not worker start-up)
and a consumer that does nothing with the batch (the worst case: loading is all there is):

* ``small``: 16 x 3x64x64 float32 (768 KiB per batch), 2 workers: the IPC-bound case, where a
  fixed cost per batch weighs most;
* ``seed``: the seed's 32 x 3x224x224 float32 (18.4 MiB per batch), 2 workers, half as many
  batches per epoch and a third of the rounds.

An epoch also pays a fixed cost (the watcher's start: about 0.3-2 ms here; its stop, which
waits for the thread: 0.3-25 ms on a loaded machine), spread over its batches; real epochs are
far longer than these.

Each round runs a bare epoch, a guarded epoch and a second bare epoch, each kind taking each
place in turn. Two ratios, each printed beside the same figure for the two bare epochs (how far
two identical epochs differ on this machine, the noise floor):

* **wall ratio**: the median, over rounds, of the guarded epoch's wall time per batch over the
  bare epoch's next to it (paired, so a change in the machine's load between rounds cancels);
  what a training loop sees;
* **CPU ratio**: 1 + (median over rounds of the extra CPU seconds per batch of this process,
  all its threads, the watcher included, workers not) / (median bare wall time per batch):
  the guard's own work as a share of a batch.

On a shared machine both move by a few % between runs; use ``--rounds`` to tighten them.
The guard's work per batch is two clock reads and a generator step in the main thread, plus
its watcher thread's statvfs polls (every 50 ms and on inotify writes to /dev/shm).

Run: ``python benchmarks/guard_overhead.py [--rounds 30] [--batches 300]`` (needs torch).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

from shmguard.torch import guard


def _loader(shape: tuple[int, ...], batch_size: int, batches: int, workers: int) -> Any:
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Zeros(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return batches * batch_size

        def __getitem__(self, i: int) -> Any:
            return torch.zeros(shape), i

    return DataLoader(Zeros(), batch_size=batch_size, num_workers=workers, persistent_workers=True)


def _epoch(iterable: Any) -> tuple[float, float, int]:
    """Wall seconds, this process's CPU seconds (all its threads, not the workers) and
    batches of one epoch."""
    n = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for batch in iterable:
        n += 1
        del batch
    return time.perf_counter() - t0, time.process_time() - c0, n


def _measure(loader: Any, rounds: int) -> dict[str, float]:
    _epoch(loader)  # start the workers, warm the caches
    _epoch(guard(loader))
    kinds = ("bare", "guard", "again")
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    n = 0
    for r in range(rounds):
        for which in kinds[r % 3 :] + kinds[: r % 3]:  # each kind takes each place in turn
            t, c, n = _epoch(guard(loader) if which == "guard" else loader)
            wall[which].append(t / n)
            cpu[which].append(c / n)

    # Paired within a round, so a change in the machine's load between rounds cancels out;
    # "again" (a second bare epoch) against "bare" shows how far two identical epochs differ.
    def ratio(a: str) -> float:
        return statistics.median(x / b for x, b in zip(wall[a], wall["bare"], strict=True))

    def extra(a: str) -> float:
        return statistics.median(x - b for x, b in zip(cpu[a], cpu["bare"], strict=True))

    return {
        "wall_bare": statistics.median(wall["bare"]),
        "wall_guard": statistics.median(wall["guard"]),
        "ratio": ratio("guard"),
        "noise": ratio("again"),
        "extra_cpu": extra("guard"),
        "noise_cpu": extra("again"),
        "batches": n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--rounds", type=int, default=30, help="rounds (default 30)")
    ap.add_argument("--batches", type=int, default=150, help="batches per small epoch")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    configs = {
        "small": _loader((3, 64, 64), 16, args.batches, 2),
        "seed": _loader((3, 224, 224), 32, max(args.batches // 2, 20), 2),
    }
    # The seed's batches take about 10x longer: a third of the rounds keeps the run short.
    rounds = {"small": args.rounds, "seed": max(args.rounds // 3, 5)}
    print(
        f"{'loader':>7} {'batches':>7} {'bare ms':>8} {'guarded ms':>10} {'wall ratio':>10} "
        f"{'(bare/bare)':>11} {'extra CPU us':>12} {'(bare/bare)':>11} {'CPU ratio':>9}"
    )
    for name, loader in configs.items():
        m = _measure(loader, rounds[name])
        cpu_ratio = 1 + m["extra_cpu"] / m["wall_bare"]
        print(
            f"{name:>7} {int(m['batches']):>7} {m['wall_bare'] * 1e3:>8.3f} "
            f"{m['wall_guard'] * 1e3:>10.3f} {m['ratio']:>10.4f} {m['noise']:>11.4f} "
            f"{m['extra_cpu'] * 1e6:>12.1f} {m['noise_cpu'] * 1e6:>11.1f} {cpu_ratio:>9.4f}"
        )
    print("target: ratios below 1.01; (bare/bare) is two bare epochs compared the same way")


if __name__ == "__main__":
    main()

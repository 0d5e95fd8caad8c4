"""How close ``tune``'s pick comes to the best of an exhaustive grid, and at what cost.

For each bundled loader (small batches: 8 samples, 10 batches an epoch, so trials cross an
epoch boundary and ``persistent_workers`` matters), under one budget: ``tune`` (the search),
then the baseline, every configuration of the grid ``num_workers`` 0..CPUs x
``prefetch_factor`` 1..4 x ``persistent_workers`` run as the same trial (a sandbox of the
budget, the same steps), configurations the DataLoader model rules out skipped as ``tune``
skips them. Prints per loader: the tuner's pick and its throughput (as the tuner measured it
and as the grid measured the same configuration), the grid's best, the ratio of the two, and
the wall time and trial count of each (target: >= 95% of the best in <= 30% of the grid's
time). Throughput on a shared machine is noisy: two runs of one configuration differ by
several percent. Needs root and torch.

Run: ``python benchmarks/tune_efficiency.py [--loaders seed fits] [--steps 12]``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from shmguard.examples import fits_loader, numpy_loader, seed_loader
from shmguard.torch.tuning import tune
from shmguard.torch.tuning.model import Trial, TrialConfig, config
from shmguard.torch.tuning.search import TOLERANCE
from shmguard.torch.tuning.trial import (
    TrialPlan,
    default_pythonpath,
    predicted_peak,
    run_trial,
)
from shmguard.units import GiB, MiB

SMALL = {"batch_size": 8, "batches": 10}


def seed(num_workers: int = 0, prefetch_factor: Any = 2, persistent_workers: bool = False,
         pin_memory: bool = False) -> Any:  # fmt: skip
    """seed_loader with 8-image batches (4.6 MiB)."""
    return seed_loader.loader(num_workers, prefetch_factor, persistent_workers, pin_memory, **SMALL)


def numpy(num_workers: int = 0, prefetch_factor: Any = 2, persistent_workers: bool = False,
          pin_memory: bool = False) -> Any:  # fmt: skip
    """numpy_loader with 8-array batches (4.6 MiB)."""
    return numpy_loader.loader(
        num_workers, prefetch_factor, persistent_workers, pin_memory, **SMALL
    )


def fits(num_workers: int = 0, prefetch_factor: Any = 2, persistent_workers: bool = False,
         pin_memory: bool = False) -> Any:  # fmt: skip
    """fits_loader with 8-image uint8 batches (1.1 MiB)."""
    return fits_loader.loader(num_workers, prefetch_factor, persistent_workers, pin_memory, **SMALL)


LOADERS = {
    "seed": "tune_efficiency:seed",
    "numpy": "tune_efficiency:numpy",
    "fits": "tune_efficiency:fits",
}


def grid(cpus: int) -> list[TrialConfig]:
    """The exhaustive grid."""
    out = [config(0)]
    for nw in range(1, cpus + 1):
        out += [config(nw, pf, pw) for pf in (1, 2, 3, 4) for pw in (False, True)]
    return out


def run_grid(plan: TrialPlan, cpus: int, pages: int) -> tuple[list[Trial], float]:
    t0 = time.monotonic()
    trials = []
    for cfg in grid(cpus):
        if cfg.num_workers and predicted_peak(cfg, pages) > plan.shm:
            continue  # the model rules it out: tune never runs it either
        trial = run_trial(plan, cfg)[0]
        if trial.status == "interrupted":
            raise KeyboardInterrupt  # Ctrl-C reached the trial: stop the benchmark too
        trials.append(trial)
    return trials, time.monotonic() - t0


def row(name: str, search: str, trials: int, wall: float, label: str, rate: float) -> str:
    """One line of the table."""
    return f"{name:<7} {search:<6} {trials:>6} {wall:>7.1f}  {label:<24} {rate:>9.0f}"


def compare(name: str, ref: str, args: argparse.Namespace, cpus: int) -> tuple[float, float]:
    """Tune ``ref``, run the grid, print the comparison; return both wall times."""
    shm, memory = args.shm * MiB, 2 * GiB
    t0 = time.monotonic()
    res = tune(ref, budget_shm=shm, budget_memory=memory, cpus=cpus, steps=args.steps)
    t_tune = time.monotonic() - t0
    rec = res.recommended
    assert rec is not None and rec.samples_per_s is not None
    plan = TrialPlan(
        ref, args.steps, 3, 0.0, shm, memory, float(cpus), 60.0, 5.0, default_pythonpath()
    )
    trials, t_grid = run_grid(plan, cpus, res.trials[0].batch_pages)
    best = max((t for t in trials if t.ok), key=lambda t: t.samples_per_s or 0.0)
    top = best.samples_per_s or 1.0
    same = next(t for t in trials if t.config == rec.config)
    ran = sum(1 for t in res.trials if t.status != "ruled-out")
    tail = f"  (the grid measured it at {same.samples_per_s or 0:.0f})"
    print(row(name, "tune", ran, t_tune, rec.config.label(), rec.samples_per_s) + tail)
    print(row("", "grid", len(trials), t_grid, best.config.label(), top))
    close = sum(1 for t in trials if t.ok and (t.samples_per_s or 0) >= (1 - TOLERANCE) * top)
    print(
        f"{'':<7} pick = {(same.samples_per_s or 0) / top:.0%} of the grid's best by the grid's "
        f"own measurements ({rec.samples_per_s / top:.0%} by the tuner's); {close} grid "
        f"configs within {TOLERANCE:.0%} of the best; {t_tune / t_grid:.0%} of the grid's time"
    )
    return t_tune, t_grid


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--loaders", nargs="+", choices=sorted(LOADERS), default=list(LOADERS))
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--shm", type=int, default=40, help="shm budget in MiB (default 40)")
    args = p.parse_args()
    cpus = min(2, len(os.sched_getaffinity(0)))
    print(
        f"# budget: /dev/shm {args.shm} MiB, memory 2 GiB, {cpus} CPUs; {args.steps} timed "
        f"batches per trial after 3 warm-up, no step time; load average at start "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'loader':<7} {'search':<6} {'trials':>6} {'wall s':>7}  {'pick / best':<24} samples/s")
    t_tune = t_grid = 0.0
    for name in args.loaders:
        a, b = compare(name, LOADERS[name], args, cpus)
        t_tune, t_grid = t_tune + a, t_grid + b
    print(
        f"all: tune {t_tune:.0f} s, grid {t_grid:.0f} s: {t_tune / t_grid:.0%} of the grid's time"
    )


if __name__ == "__main__":
    main()

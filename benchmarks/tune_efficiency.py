"""How close ``tune``'s pick comes to the best of an exhaustive grid, and at what cost.

For each bundled loader (small batches: 8 samples, 10 batches an epoch, so trials cross an
epoch boundary and ``persistent_workers`` matters), under one budget: ``tune`` (the search),
then the baseline, every configuration of the grid ``num_workers`` 0..CPUs x
``prefetch_factor`` 1..4 x ``persistent_workers`` run as the same trial (a sandbox of the
budget, the same steps), configurations the DataLoader model rules out skipped as ``tune``
skips them. Prints per loader: the tuner's pick and its throughput (as the tuner measured it,
the median of its confirmation round, and as the grid measured the same configuration), the
grid's best, and the wall time and trial count of each. A single trial's figure on a shared
machine is noisy (the same configuration measured twice differed by 2x here), and the grid's
best is the maximum of noisy figures, so the pick and the grid's best are then re-measured as
single trials in alternation (``--repeats`` times each, pick best pick best ...) and the ratio
is taken from the medians; the raw figures are printed. Target: >= 95% of the best in <= 30%
of the grid's time. Needs root and torch.

The grid (the baseline) and the re-measurements run each configuration the plain way a user
trying it would: a fresh run, a new Python that imports torch and the loader, per
configuration. ``tune`` forks its trials from one process that imported them once
(``shmguard.torch.tuning.zygote``; ``--fresh-tune``: tune with a new Python per trial too).
Where tune's time goes is printed per loader from its progress events: start-up (the fork
server's imports) until the first trial, the trials (of which the timed batches, from each
trial's samples/s), the confirmation round.

Run: ``python benchmarks/tune_efficiency.py [--loaders seed fits] [--steps 20] [--repeats 5]
[--fresh-tune]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from shmguard.examples import fits_loader, numpy_loader, seed_loader
from shmguard.torch.tuning import TuneProgress, tune
from shmguard.torch.tuning.model import Trial, TrialConfig, config
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
    """Every grid configuration the model does not rule out, as single trials."""
    t0 = time.monotonic()
    trials = []
    for cfg in grid(cpus):
        if cfg.num_workers and predicted_peak(cfg, pages) > plan.shm:
            continue  # the model rules it out: tune never runs it either
        trials.append(single(plan, cfg))
    return trials, time.monotonic() - t0


def single(plan: TrialPlan, cfg: TrialConfig) -> Trial:
    """One trial of ``cfg``."""
    trial = run_trial(plan, cfg)[0]
    if trial.status == "interrupted":
        raise KeyboardInterrupt  # Ctrl-C reached the trial: stop the benchmark too
    return trial


def remeasure(plan: TrialPlan, a: TrialConfig, b: TrialConfig, n: int) -> tuple[list[float], ...]:
    """``a`` and ``b`` as single trials (the grid's own measurement), ``n`` times each in
    alternation (a b a b ...), so a change of load falls on both alike."""
    ra: list[float] = []
    rb: list[float] = []
    for _ in range(n):
        for cfg, out in ((a, ra), (b, rb)):
            out.append(single(plan, cfg).samples_per_s or 0.0)
    return ra, rb


class Phases:
    """Times tune's progress events: start-up, trials, confirmation round."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.first: float | None = None
        self.confirm: float | None = None
        self.end = self.t0

    def __call__(self, event: TuneProgress) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
        if event.phase == "confirm" and self.confirm is None:
            self.confirm = now
        self.end = now

    def summary(self, trials: tuple[Trial, ...], steps: int) -> str:
        """Start-up, trials (timed batches among them) and confirmation, in seconds."""
        first = self.first or self.end
        confirm = self.confirm or self.end
        timed = sum(
            steps * SMALL["batch_size"] / rate
            for t in trials
            if (rate := t.single_samples_per_s or t.samples_per_s)
        )
        return (
            f"start-up {first - self.t0:.1f} s, trials {confirm - first:.1f} s (timed batches "
            f"{timed:.1f} s), confirmation {self.end - confirm:.1f} s"
        )


def row(name: str, search: str, trials: int, wall: float, label: str, rate: float) -> str:
    """One line of the table."""
    return f"{name:<7} {search:<6} {trials:>6} {wall:>7.1f}  {label:<24} {rate:>9.0f}"


def described(t: Trial) -> str:
    """A tuner's trial: its config and figure (the runs behind a median)."""
    text = f"{t.config.label()} {t.samples_per_s or 0:.0f}"
    if t.repeats:
        runs = " ".join(f"{r:.0f}" for r in t.repeats)
        text += f" (median of {runs}; single {t.single_samples_per_s or 0:.0f})"
    return text


def runs(xs: list[float]) -> str:
    """Raw figures, their median and spread."""
    med = statistics.median(xs)
    return (
        f"{' '.join(f'{x:.0f}' for x in xs)} (median {med:.0f}, spread "
        f"{(max(xs) - min(xs)) / med:.0%})"
    )


def compare(name: str, ref: str, args: argparse.Namespace, cpus: int) -> tuple[float, float]:
    """Tune ``ref``, run the grid, re-measure both picks, print the comparison; return both
    wall times."""
    shm, memory = args.shm * MiB, 2 * GiB
    print(f"## {name}: load average {os.getloadavg()[0]:.1f} at its start")
    clock = Phases()
    res = tune(
        ref,
        budget_shm=shm,
        budget_memory=memory,
        cpus=cpus,
        steps=args.steps,
        progress=clock,
        fork_trials=not args.fresh_tune,
    )
    t_tune = time.monotonic() - clock.t0
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
    how = f"median of {len(rec.repeats)} runs" if rec.repeats else "single trial"
    tail = (
        f"  (tuner's figure: {how}; the grid's single trial of it: {same.samples_per_s or 0:.0f})"
    )
    print(row(name, "tune", ran, t_tune, rec.config.label(), rec.samples_per_s) + tail)
    print(row("", "grid", len(trials), t_grid, best.config.label(), top))
    tried = ", ".join(described(t) for t in res.trials if t.ok)
    print(f"{'':<7} tuner's trials: {tried}")
    for note in res.notes[:1]:
        print(f"{'':<7} tuner: {note}")
    fresh = [n for n in res.notes if n.startswith("each trial started a fresh Python")]
    how = fresh[0] if fresh else "trials forked from one process that imported torch once"
    print(f"{'':<7} tuner's time: {clock.summary(res.trials, args.steps)}; {how}")
    print(
        f"{'':<7} single runs: pick = {(same.samples_per_s or 0) / top:.0%} of the grid's best by "
        f"the grid's own trials; time: tune {t_tune:.1f} s / grid {t_grid:.1f} s = "
        f"{t_tune / t_grid:.0%}"
    )
    if rec.config == best.config:
        print(f"{'':<7} re-measured: the tuner picked the grid's best configuration itself: 100%")
        return t_tune, t_grid
    ra, rb = remeasure(plan, rec.config, best.config, args.repeats)
    print(f"{'':<7} re-measured in alternation, {args.repeats} single trials each:")
    print(f"{'':<9} pick {rec.config.label():<22} {runs(ra)}")
    print(f"{'':<9} best {best.config.label():<22} {runs(rb)}")
    print(
        f"{'':<7} pick = {statistics.median(ra) / statistics.median(rb):.0%} of the grid's best "
        "by the medians of the re-measurement"
    )
    return t_tune, t_grid


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--loaders", nargs="+", choices=sorted(LOADERS), default=list(LOADERS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--shm", type=int, default=40, help="shm budget in MiB (default 40)")
    p.add_argument("--repeats", type=int, default=5, help="re-measurements of each (default 5)")
    p.add_argument(
        "--fresh-tune", action="store_true", help="tune with a new Python per trial as well"
    )
    args = p.parse_args()
    cpus = min(2, len(os.sched_getaffinity(0)))
    print(
        f"# budget: /dev/shm {args.shm} MiB, memory 2 GiB, {cpus} CPUs; {args.steps} timed "
        f"batches per trial after 3 warm-up, no step time; load average at start "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"# grid: num_workers 0..{cpus} x prefetch_factor 1..4 x persistent_workers False/True "
        f"= {len(grid(cpus))} configurations, those the DataLoader model rules out skipped; "
        "the grid and the re-measurements run each configuration fresh (a new Python per "
        "configuration, as a user trying each would); tune "
        + ("too (--fresh-tune)" if args.fresh_tune else "forks its trials from one process")
    )
    print(f"{'loader':<7} {'search':<6} {'trials':>6} {'wall s':>7}  {'pick / best':<24} samples/s")
    t_tune = t_grid = 0.0
    for name in args.loaders:
        a, b = compare(name, LOADERS[name], args, cpus)
        t_tune, t_grid = t_tune + a, t_grid + b
    print(
        f"all: tune {t_tune:.0f} s, grid {t_grid:.0f} s: {t_tune / t_grid:.0%} of the grid's time;"
        f" load average at end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

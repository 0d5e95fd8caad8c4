"""How much one tune measurement varies, and what alternation in one sandbox changes.

Two configurations of one bundled loader (benchmarks/tune_efficiency.py's 8-sample batches),
A and B, measured ``--pairs`` times each in two ways, with the same trial settings:

* separate: A and B as single trials, one sandbox (and one Python start-up) each, A B A B ...
  (how the search and the exhaustive grid measure);
* alternated: one confirmation run (:func:`shmguard.torch.tuning.trial.run_confirmation`), A B
  A B ... in one sandbox (how the confirmation round measures).

For each way and each ``--steps`` it prints the runs, each configuration's spread
``(max - min) / median``, and the ratio A/B of each pair with the spread of those ratios: the
figure that decides whether A and B can be told apart. Needs root and torch.

Run: ``python benchmarks/tune_noise.py [--loader seed] [--pairs 4] [--steps 20 60]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from shmguard.torch.tuning.model import config
from shmguard.torch.tuning.trial import TrialPlan, default_pythonpath, run_confirmation, run_trial
from shmguard.units import GiB, MiB


def spread(xs: list[float]) -> float:
    """``(max - min) / median``."""
    return (max(xs) - min(xs)) / statistics.median(xs)


def show(way: str, steps: int, a: list[float], b: list[float], wall: float) -> None:
    """One way's figures."""
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    print(f"{way:<10} steps={steps:<3} wall {wall:5.1f} s")
    print(f"  A runs {' '.join(f'{x:.0f}' for x in a)}  spread {spread(a):.0%}")
    print(f"  B runs {' '.join(f'{x:.0f}' for x in b)}  spread {spread(b):.0%}")
    print(
        f"  A/B    {' '.join(f'{r:.2f}' for r in ratios)}  median {statistics.median(ratios):.2f}"
        f"  spread {spread(ratios):.0%}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--loader", default="seed", choices=("seed", "numpy", "fits"))
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--steps", type=int, nargs="+", default=[20, 60])
    args = p.parse_args()
    ref = f"tune_efficiency:{args.loader}"
    a, b = config(1, 2, True), config(2, 2, True)
    print(
        f"# {ref}: A = {a.label()}, B = {b.label()}; /dev/shm 40 MiB, memory 2 GiB, 2 CPUs; "
        f"load average at start {os.getloadavg()[0]:.1f}"
    )
    for steps in args.steps:
        plan = TrialPlan(
            ref, steps, 3, 0.0, 40 * MiB, 2 * GiB, 2.0, 120.0, 5.0, default_pythonpath()
        )
        t0 = time.monotonic()
        ra: list[float] = []
        rb: list[float] = []
        for _ in range(args.pairs):
            for cfg, out in ((a, ra), (b, rb)):
                trial = run_trial(plan, cfg)[0]
                assert trial.samples_per_s is not None, trial
                out.append(trial.samples_per_s)
        show("separate", steps, ra, rb, time.monotonic() - t0)
        t0 = time.monotonic()
        rates, reason, _ = run_confirmation(plan, [a, b], args.pairs)
        assert rates is not None, reason
        show("alternated", steps, rates[0], rates[1], time.monotonic() - t0)
    print(f"# load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Trials and wall time ``shmguard probe`` needs for the bundled examples, next to a fixed-step
search over the same range, run for real in the same command.

Both searches use fresh sandboxes with the same per-trial settings, the same resolution (5% of
the measured peak) and the same reliability rule (3 passes in a row). The fixed-step search
walks up from the floor (0) in steps of that resolution until a size passes 3 times in a row;
probe bisects (see docs/probe.md). Prints per example: runs, wall time, the minimum found, and
the ratios. Needs root (or user namespaces) and torch.

Run: ``python benchmarks/probe_cost.py [--examples seed_loader fits_loader] [--batches 10]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from shmguard.measure.probe import probe_command
from shmguard.measure.run import measure_command
from shmguard.units import MiB, format_iec

EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "shmguard" / "examples"


def fixed_step(argv: list[str], step: int, top: int, confirm: int = 3) -> tuple[int, int, float]:
    """(runs, minimum, seconds) of an upward fixed-step search with ``confirm`` passes in a row."""
    t0 = time.monotonic()
    base = measure_command(argv, output="capture")  # the same measuring run probe starts with
    runs = 1
    size = step
    while size < top:
        streak = 0
        while streak < confirm:
            r = measure_command(argv, shm_size=size, output="capture", timeout=90, hang_after=5.0)
            runs += 1
            if not r.passed:
                break
            streak += 1
        if streak == confirm:
            return runs, size, time.monotonic() - t0
        size += step
    return runs, base.shm_size, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", nargs="+", default=["seed_loader", "numpy_loader", "fits_loader"])
    ap.add_argument("--batches", type=int, default=10, help="batches per run (default 10)")
    ap.add_argument("--step-time", type=float, default=0.1, help="fake training s per batch")
    args = ap.parse_args()
    print(f"{'example':<14} {'search':<11} {'runs':>5} {'wall s':>8} {'minimum':>10}")
    for name in args.examples:
        argv = [
            sys.executable,
            str(EXAMPLES / f"{name}.py"),
            "--quiet",
            "--batches",
            str(args.batches),
            "--step-time",
            str(args.step_time),
        ]
        p = probe_command(argv, hang_after=5.0, verify=False)
        if p.minimum is None:
            print(f"{name:<14} probe found no minimum: {p.minimum_basis}")
            continue
        step = max(MiB, int(p.measure.peak * p.tolerance) // MiB * MiB)
        f_runs, f_min, f_wall = fixed_step(argv, step, p.measure.shm_size)
        found = format_iec(p.minimum)
        print(f"{name:<14} {'bisection':<11} {p.runs:>5} {p.wall_time:>8.1f} {found:>10}")
        print(f"{'':<14} {'fixed-step':<11} {f_runs:>5} {f_wall:>8.1f} {format_iec(f_min):>10}")
        print(
            f"{'':<14} probe needs {p.runs / f_runs:.2f}x the runs and "
            f"{p.wall_time / f_wall:.2f}x the time (step {format_iec(step)})"
        )


if __name__ == "__main__":
    main()

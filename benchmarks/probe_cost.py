"""Runs and wall time ``shmguard probe`` needs, from the DataLoader model (the search since
issue 9) against the baseline, the search from the measured peak (before it), run for real in
the same command, one after the other for each job.

Jobs: the bundled examples and a job the model was not written for
(tests/fixtures/measure/dict_loader.py: dicts, 2 workers, prefetch_factor 3). Both searches
are ``probe_command`` with the same settings (3 passes in a row at the minimum, the
recommendation verified: ``probe``'s defaults); the baseline is ``use_model=False``. Prints per
job: runs, wall time and minimum of each, and the ratios. ``--fixed-step`` adds the upward
fixed-step search (steps of 5% of the measured peak, 3 passes in a row) as a third row. Needs
root (or user namespaces) and torch.

Run: ``python benchmarks/probe_cost.py [--jobs seed_loader dict_loader] [--batches 10]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from shmguard.measure.probe import ProbeResult, probe_command
from shmguard.measure.run import measure_command
from shmguard.units import MiB, format_iec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "shmguard" / "examples"
NEW_JOB = ROOT / "tests" / "fixtures" / "measure" / "dict_loader.py"
JOBS = ("seed_loader", "numpy_loader", "fits_loader", "dict_loader")


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


def command(job: str, batches: int, step_time: float) -> list[str]:
    """argv of one job."""
    if job == "dict_loader":
        return [sys.executable, str(NEW_JOB), "--batches", str(batches)]
    return [
        sys.executable,
        str(EXAMPLES / f"{job}.py"),
        "--quiet",
        "--batches",
        str(batches),
        "--step-time",
        str(step_time),
    ]


def row(job: str, search: str, p: ProbeResult) -> str:
    """One line of the table."""
    found = format_iec(p.minimum) if p.minimum is not None else "none"
    ok = {True: "yes", False: "NO", None: "-"}[p.verified]
    return f"{job:<13} {search:<11} {p.runs:>5} {p.wall_time:>8.1f} {found:>12} {ok:>9}"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--jobs", nargs="+", default=list(JOBS), choices=JOBS)
    ap.add_argument("--batches", type=int, default=10, help="batches per run (default 10)")
    ap.add_argument("--step-time", type=float, default=0.1, help="fake training s per batch")
    ap.add_argument("--fixed-step", action="store_true", help="also run the fixed-step search")
    args = ap.parse_args()
    print(f"{'job':<13} {'search':<11} {'runs':>5} {'wall s':>8} {'minimum':>12} {'verified':>9}")
    totals = {"peak": [0, 0.0], "model": [0, 0.0]}
    for job in args.jobs:
        argv = command(job, args.batches, args.step_time)
        before = probe_command(argv, hang_after=5.0, use_model=False)
        after = probe_command(argv, hang_after=5.0)
        print(row(job, "from peak", before))
        print(row("", "from model", after))
        for key, p in (("peak", before), ("model", after)):
            totals[key][0] += p.runs
            totals[key][1] += p.wall_time
        print(
            f"{'':<13} the model needs {after.runs / before.runs:.2f}x the runs and "
            f"{after.wall_time / before.wall_time:.2f}x the time of the baseline"
        )
        if args.fixed_step:
            step = max(MiB, int(before.measure.peak * before.tolerance) // MiB * MiB)
            f_runs, f_min, f_wall = fixed_step(argv, step, before.measure.shm_size)
            print(f"{'':<13} {'fixed-step':<11} {f_runs:>5} {f_wall:>8.1f} {format_iec(f_min):>12}")
    (r0, w0), (r1, w1) = totals["peak"], totals["model"]
    print(
        f"all jobs: from peak {r0} runs {w0:.1f} s; from model {r1} runs {w1:.1f} s: "
        f"{r1 / r0:.2f}x the runs, {w1 / w0:.2f}x the time"
    )


if __name__ == "__main__":
    main()

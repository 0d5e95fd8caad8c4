"""Wall time of ``shmguard doctor --json`` next to ``python -m torch.utils.collect_env``.

Both run as fresh processes in this same command, alternating, so machine load hits both alike.
Prints each median, the ratio, and what the issue targets (<= 0.2 s and >= 8x faster).

Run: ``python benchmarks/doctor_startup.py [--runs 15] [--baseline-runs 5]``.

Notes printed with the result: the Typer version (Typer 0.29 builds a pydantic TypeAdapter per
option at parse time, about 0.25 s here; earlier versions do not) and whether Python may write
bytecode caches (``PYTHONDONTWRITEBYTECODE=1`` recompiles every module on every start).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata


def _once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env, timeout=120, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.decode()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="runs of shmguard doctor --json")
    ap.add_argument("--baseline-runs", type=int, default=5, help="runs of collect_env")
    ap.add_argument(
        "--keep-env",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE as set (default: allow bytecode caches, as an "
        "installed package has)",
    )
    args = ap.parse_args()
    env = dict(os.environ)
    if not args.keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    # Exactly what the console script runs, with this interpreter (a PATH lookup could find
    # another environment's shmguard, or a pyenv shim that adds its own start-up).
    doctor = [sys.executable, "-c", "from shmguard.cli import main; main()"]
    doctor += ["doctor", "--json", "--fail-on", "never"]
    baseline = [sys.executable, "-m", "torch.utils.collect_env"]
    bare = [sys.executable, "-c", "pass"]
    # Warm-up: page cache, bytecode caches.
    _once(doctor, env)
    _once(baseline, env)
    empty = [_once(bare, env)[0] for _ in range(args.runs)]
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for i in range(max(args.runs, args.baseline_runs)):
        if i < args.runs:
            ours.append(_once(doctor, env))
        if i < args.baseline_runs:
            theirs.append(_once(baseline, env))
    a, b = (statistics.median(w for w, _ in ours), statistics.median(w for w, _ in theirs))
    ca, cb = (statistics.median(c for _, c in ours), statistics.median(c for _, c in theirs))
    print(
        f"shmguard doctor --json            median {a:.3f} s wall, {ca:.3f} s CPU "
        f"({len(ours)} runs)"
    )
    print(
        f"python -m torch.utils.collect_env median {b:.3f} s wall, {cb:.3f} s CPU "
        f"({len(theirs)} runs)"
    )
    print(
        f"bare interpreter (python -c pass) median {statistics.median(empty):.3f} s wall: "
        f"doctor adds {a - statistics.median(empty):.3f} s"
    )
    print(f"ratio: doctor is {b / a:.1f}x faster (target >= 8x); doctor <= 0.2 s: {a <= 0.2}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"typer {metadata.version('typer')}; bytecode caches "
        f"{'off' if env.get('PYTHONDONTWRITEBYTECODE') else 'on'}; python {sys.version.split()[0]}"
    )


if __name__ == "__main__":
    main()

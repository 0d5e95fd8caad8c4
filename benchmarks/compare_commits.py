"""Two versions of shmguard side by side: check throughput, doctor start-up, explain throughput.

Issue 19 asks that the one-answer redesign leave these three no worse: "measured as the median
of 8 runs alternating the old and the new commit in one command, with the load average
printed". This script is that command. Give it two source trees (a checkout or a
``git worktree add DIR COMMIT`` of each commit); each run is a fresh ``python -m shmguard`` with
``PYTHONPATH=TREE/src``, the trees taking turns (old, new, old, new, ...) so a busy spell on the
machine falls on both. Bytecode is compiled once per tree before timing (one untimed run each,
``PYTHONPYCACHEPREFIX`` in a temporary directory), as an installed package has it.

Workloads, each a subprocess timed by wall clock and by CPU (user + system of the child):

* ``check``: ``shmguard check --jobs 1`` over copies of ../shared/corpus/k8s and
  ../shared/corpus/compose (1,320 YAML files), the library's whole path with start-up; and the
  default ``--jobs 0`` (one worker per usable CPU);
* ``check-file``: ``shmguard check --jobs 1 --force-exclude FILE`` on one small Compose file, as
  the pre-commit hook runs it (start-up is most of it; not in the default ``--only``);
* ``doctor``: ``shmguard doctor --json`` (start-up and the host inspection);
* ``explain``: ``shmguard explain --json`` on a generated log of ``--explain-mb`` megabytes
  (noise lines with the failure logs of tests/fixtures/logs planted inside).

Prints, per workload, the median wall and CPU seconds of each tree, the ratio new/old (below
1.00: the new one is faster) and the load average at the start and the end.

Usage::

    git worktree add /tmp/shmguard-old OLD_COMMIT
    python benchmarks/compare_commits.py --old /tmp/shmguard-old --new . [--runs 8]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
LOGS = REPO / "tests" / "fixtures" / "logs"


def _env(tree: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree / "src")
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env.pop("COLUMNS", None)
    return env


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run; exits on a status other than 0 or 1 (findings)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, env=env, timeout=600, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _make_log(path: Path, megabytes: int) -> None:
    """Noise lines with every fixture log planted at random places, ``megabytes`` MB in all."""
    planted = [p.read_bytes() for p in sorted(LOGS.rglob("*")) if p.is_file() and p.suffix != ".md"]
    rng = random.Random(19)
    noise = [
        b"2026-12-01T10:00:00.000Z step %d loss 0.%04d lr 3e-4\n",
        b"node-1:123:456 [0] NCCL INFO Channel %02d/32 : 0[%d] -> 1[1] via P2P/IPC\n",
        b"Epoch 3:  %d%%|#####     | 512/1024 [00:10<00:10, %d.2it/s]\n",
    ]
    target = megabytes * 1_000_000
    with path.open("wb") as f:
        written = 0
        while written < target:
            chunk = b"".join(rng.choice(noise) % (i, i % 10000) for i in range(2000))
            if rng.random() < 0.05:
                chunk += rng.choice(planted)
            f.write(chunk)
            written += len(chunk)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="source tree of the old commit")
    ap.add_argument("--new", type=Path, required=True, help="source tree of the new commit")
    ap.add_argument("--runs", type=int, default=8, help="alternated runs of each tree")
    ap.add_argument("--explain-mb", type=int, default=64, help="size of the explain log")
    ap.add_argument("--only", default="check,check-jobs0,doctor,explain")
    args = ap.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"{CORPUS} is absent")
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    with tempfile.TemporaryDirectory(prefix="shmguard-cmp-") as tmp_s:
        tmp = Path(tmp_s)
        yaml_dir = tmp / "corpus"
        for sub in ("k8s", "compose"):
            shutil.copytree(CORPUS / sub, yaml_dir / sub)
        log = tmp / "train.log"
        if "explain" in args.only.split(","):
            _make_log(log, args.explain_mb)
        small = tmp / "small" / "compose.yaml"  # the file a pre-commit hook checks
        small.parent.mkdir()
        small.write_text("services:\n  train:\n    image: pytorch/pytorch:2.3.0\n")
        envs = {name: _env(tree, tmp / f"pycache-{name}") for name, tree in trees.items()}
        py = [sys.executable, "-m", "shmguard"]
        workloads = {
            "check": [*py, "check", "--jobs", "1", "--format", "json", str(yaml_dir)],
            "check-jobs0": [*py, "check", "--format", "json", str(yaml_dir)],
            "check-file": [*py, "check", "--jobs", "1", "--force-exclude", str(small)],
            "doctor": [*py, "doctor", "--json"],
            "explain": [*py, "explain", "--json", str(log)],
        }
        chosen = [w for w in args.only.split(",") if w]
        print(f"old: {trees['old']}\nnew: {trees['new']}")
        print(f"load average at the start: {_load()}")
        for name in chosen:
            argv = workloads[name]
            for env in envs.values():
                _once(argv, env)  # untimed: compile bytecode, warm the page cache
            times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
            for _ in range(args.runs):
                for tree in ("old", "new"):
                    times[tree].append(_once(argv, envs[tree]))
            wall = {t: statistics.median(w for w, _ in v) for t, v in times.items()}
            cpu = {t: statistics.median(c for _, c in v) for t, v in times.items()}
            print(
                f"{name:12s} old {wall['old']:.3f} s wall {cpu['old']:.3f} s CPU | "
                f"new {wall['new']:.3f} s wall {cpu['new']:.3f} s CPU | "
                f"new/old {wall['new'] / wall['old']:.3f} wall, {cpu['new'] / cpu['old']:.3f} CPU "
                f"(median of {args.runs}, load now {_load()})"
            )
        print(f"load average at the end: {_load()}")


if __name__ == "__main__":
    main()

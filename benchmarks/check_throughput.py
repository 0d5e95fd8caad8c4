"""Speed of ``shmguard check``: one small file, the corpus against Checkov, the library against
a bare PyYAML parse (issue 21 item 6's three figures).

Prints, each as the median of ``--runs`` alternated runs (wall clock and CPU seconds: user +
system of this process and its children, which a busy machine disturbs less):

1. ``check FILE``: ``python -m shmguard check`` on one small Compose file (start-up and all),
   in turns with the bare interpreter (``python -c pass``) on the same machine: the figure a
   pre-commit hook pays on every commit (target: at most 0.12 s wall);
2. the library (``load_bytes`` + ``check_loaded``: sources, workload detection, every SHM
   rule, fixes computed) against a bare ``yaml.compose_all(CSafeLoader)`` over every YAML file
   of corpus/compose and corpus/k8s, in turns (target: at least 60 % of the bare parse's
   throughput); then the library on the 334 ``docker run`` lines of
   corpus/docker_run_lines.tsv (each one a ``.sh`` file);
3. the CLI as a subprocess (start-up included) on copies of the YAML files: the default
   (``--jobs 0``: one process per usable CPU, at most one per 64 files and 768 KiB of work;
   the number is on the row) and ``--jobs 1``, in turns with each other and with Checkov
   (``checkov --skip-download --framework kubernetes -d DIR``, from its own virtual
   environment; its kubernetes runner reads every ``.yaml``/``.yml`` and keeps the documents
   with ``apiVersion`` and ``kind``: Checkov has no Compose framework). Targets: the default
   at least 20x Checkov (CLI against CLI, same files, start-up included, each using the CPUs
   it uses by default: Checkov runs several processes too), and not slower than ``--jobs 1``.

Ratios are the medians of the per-run ratios (each run's pair ran back to back), wall and (CPU).
The load average is printed at the start and the end: on the shared 2-CPU development machine
other work moves every wall-clock figure (docs/check.md, "Speed").

Files are copied to a temporary directory first: Checkov 3.3.30 found no resource at all when
given the corpus's own path (0 resources from ``-d ../shared/corpus/k8s``; the same files
copied to /tmp gave 1,851), so both CLIs read the copies. Both CLIs run from compiled bytecode,
as installed packages do (pip compiles them; Checkov's venv has its ``__pycache__``): for
``shmguard``, run from the source tree, ``PYTHONDONTWRITEBYTECODE`` (set on the development
machine) is dropped and ``PYTHONPYCACHEPREFIX`` points into the temporary directory, filled by
one untimed run first; compiling its modules again on every run cost 0.15-0.2 s here. The
``shmguard`` timed is the one this interpreter imports (``PYTHONPATH=TREE/src`` picks a tree).

Checkov's environment (the PyPI package, kept apart from the project's)::

    python3 -m venv /tmp/checkov-venv && /tmp/checkov-venv/bin/pip install checkov==3.3.30

Usage::

    python benchmarks/check_throughput.py [--runs 8] [--checkov-runs N] [--file-runs 21]
        [--checkov PATH | --no-checkov] [--quick]

``--quick`` (2 runs, 1 of Checkov, 7 of ``check FILE``) is for trying the script; the figures
to report come from the default 8 runs (about 5 minutes with Checkov on the development
machine, most of it Checkov's).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from shmguard.lint.check import check_loaded
from shmguard.lint.check_files import jobs_for, usable_cpus
from shmguard.sources.load import load_bytes

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
CHECKOV = "/tmp/checkov-venv/bin/checkov"
#: The small file of figure 1: a training service without a /dev/shm size (one finding).
SMALL = "services:\n  train:\n    image: pytorch/pytorch:2.3.0\n    command: python train.py\n"

Files = list[tuple[str, bytes]]
#: (wall seconds, CPU seconds) of one run.
Timing = tuple[float, float]


def _bare(files: Files) -> None:
    for _, data in files:
        try:
            for _ in yaml.compose_all(data.decode("utf-8"), Loader=yaml.CSafeLoader):
                pass
        except (yaml.YAMLError, UnicodeDecodeError):
            pass


def _check(files: Files) -> None:
    for name, data in files:
        check_loaded(load_bytes(data, name))


def _cpu() -> float:
    """CPU seconds of this process and its finished children (user + system)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _alternated(fns: Sequence[Callable[[], object]], runs: int) -> list[list[Timing]]:
    """Each of ``fns`` run ``runs`` times in turns (a, b, a, b, ...), so that a busy spell of the
    machine falls on all of them alike: the timings of each, in run order."""
    out: list[list[Timing]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t, c = time.perf_counter(), _cpu()
            fn()
            out[i].append((time.perf_counter() - t, _cpu() - c))
    return out


def _median(timings: list[Timing]) -> Timing:
    return statistics.median(t for t, _ in timings), statistics.median(c for _, c in timings)


def _ratio(slow: list[Timing], fast: list[Timing]) -> Timing:
    """The median over the runs of how many times faster ``fast`` was than ``slow`` (the
    runs paired in order, ``slow``'s k-th with ``fast``'s k-th): wall and CPU. A run
    measured fewer times (Checkov) pairs with the first runs of the other."""
    pairs = list(zip(slow, fast, strict=False))
    return (
        statistics.median(s[0] / f[0] for s, f in pairs),
        statistics.median(s[1] / f[1] for s, f in pairs),
    )


def _row(label: str, n: int, nbytes: int, timings: list[Timing]) -> None:
    seconds, cpu = _median(timings)
    print(
        f"{label:48s} {n / seconds:8.0f} files/s {nbytes / 1e6 / seconds:7.2f} MB/s "
        f"{seconds:7.3f} s wall {cpu:7.3f} s CPU  ({n} files, {nbytes / 1e6:.2f} MB)"
    )


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1):
        sys.exit(f"{args[0]} exited {r.returncode}: {r.stderr.decode()[-2000:]}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _corpus() -> tuple[Files, Files]:
    paths = sorted(p for k in ("compose", "k8s") for p in (CORPUS / k).rglob("*") if p.is_file())
    yaml_files = [(str(p), p.read_bytes()) for p in paths]
    with (CORPUS / "docker_run_lines.tsv").open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    run_files = [(f"{i:04d}.sh", (r["command"] + "\n").encode()) for i, r in enumerate(rows)]
    return yaml_files, run_files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--runs", type=int, default=8, help="alternated runs per figure (8)")
    ap.add_argument("--checkov-runs", type=int, help="runs of Checkov (default: --runs)")
    ap.add_argument("--file-runs", type=int, default=21, help="runs of check FILE (21)")
    ap.add_argument("--checkov", default=CHECKOV, help=f"Checkov executable ({CHECKOV})")
    ap.add_argument("--no-checkov", action="store_true", help="skip Checkov")
    ap.add_argument("--quick", action="store_true", help="2 runs, 1 of Checkov, 7 of FILE")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.checkov_runs, args.file_runs = 2, 1, 7
    ckv_runs = min(args.checkov_runs or args.runs, args.runs)

    yaml_files, run_files = _corpus()
    ny, by = len(yaml_files), sum(len(d) for _, d in yaml_files)
    nr, br = len(run_files), sum(len(d) for _, d in run_files)
    jobs = jobs_for(0, [f for f, _ in yaml_files], fix=False)
    print(f"corpus: {ny} YAML files ({by / 1e6:.2f} MB), {nr} docker run lines ({br / 1e3:.1f} kB)")
    print(f"python {sys.version.split()[0]}, PyYAML {yaml.__version__}; medians of {args.runs}")
    print(f"usable CPUs {usable_cpus()}; load average at the start {_load()}\n")

    with tempfile.TemporaryDirectory(prefix="check-throughput-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        shmguard = [sys.executable, "-m", "shmguard", "check", "--fail-on", "never"]

        # 1. check FILE, start-up included, beside the bare interpreter
        small = root / "small" / "compose.yaml"
        small.parent.mkdir()
        small.write_text(SMALL)
        one = [sys.executable, "-m", "shmguard", "check", str(small)]
        _cli(one, root, env)  # compiles the bytecode
        bare_py = [sys.executable, "-c", "pass"]
        t_one, t_py = _alternated(
            [lambda: _cli(one, root, env), lambda: _cli(bare_py, root, env)], args.file_runs
        )
        (w1, c1), (wp, cp) = _median(t_one), _median(t_py)
        print(f"check FILE (one small Compose file, {args.file_runs} runs, median):")
        print(f"  shmguard check FILE   {w1:.3f} s wall {c1:.3f} s CPU  (target <= 0.12 s wall)")
        print(f"  python -c pass        {wp:.3f} s wall {cp:.3f} s CPU  (the interpreter alone)")
        print(f"  load average now {_load()}\n")

        # 2. the library against the bare parse
        t_bare, t_lib = _alternated(
            [lambda: _bare(yaml_files), lambda: _check(yaml_files)], args.runs
        )
        _row("bare yaml.compose_all(CSafeLoader)", ny, by, t_bare)
        _row("shmguard check, library, YAML", ny, by, t_lib)
        (t_lib_run,) = _alternated([lambda: _check(run_files)], args.runs)
        _row("shmguard check, library, run lines", nr, br, t_lib_run)
        print(f"  load average now {_load()}\n")

        # 3. the CLI (default and --jobs 1) and Checkov, in turns
        ydir = root / "yaml"
        for k in ("compose", "k8s"):
            shutil.copytree(CORPUS / k, ydir / k)
        _cli([*shmguard, str(ydir)], root, env)
        ckv: list[str] | None = None
        if args.no_checkov:
            print("Checkov: skipped (--no-checkov)")
        elif not (shutil.which(args.checkov) or os.access(args.checkov, os.X_OK)):
            print(f"Checkov: {args.checkov} not found; install it as this script's docstring says")
        else:
            ckv = [args.checkov, "--skip-download", "--framework", "kubernetes"]
            ckv += ["--quiet", "--compact", "-o", "json", "-d", str(ydir)]
        fns: list[Callable[[], object]] = [
            lambda: _cli([*shmguard, str(ydir)], root, env),
            lambda: _cli([*shmguard, "--jobs", "1", str(ydir)], root, env),
        ]
        rest = args.runs - ckv_runs
        t_cli, t_cli_1 = _alternated(fns, rest) if rest > 0 else ([], [])
        t_ckv: list[Timing] = []
        if ckv is not None:
            cmd = ckv
            more = _alternated([*fns, lambda: _cli(cmd, root)], ckv_runs)
            t_cli, t_cli_1, t_ckv = more[0] + t_cli, more[1] + t_cli_1, more[2]
        else:
            more = _alternated(fns, ckv_runs)
            t_cli, t_cli_1 = t_cli + more[0], t_cli_1 + more[1]
        _row(f"shmguard check CLI, YAML ({jobs} jobs, the default)", ny, by, t_cli)
        _row("shmguard check CLI, YAML, --jobs 1", ny, by, t_cli_1)
        if t_ckv:
            _row(f"checkov --framework kubernetes, YAML ({len(t_ckv)} runs)", ny, by, t_ckv)

    print(f"\nload average at the end {_load()}")
    print("ratios, medians of the per-run ratios: wall (CPU)")
    lib = _ratio(t_bare, t_lib)
    print(f"  library / bare parse (YAML):   {lib[0]:6.1%} ({lib[1]:.1%})  (target >= 60%)")
    par = _ratio(t_cli_1, t_cli)
    print(f"  CLI default / --jobs 1:        {par[0]:6.2f}x ({par[1]:.2f}x)  (target >= 1.00x)")
    if t_ckv:
        r0, r1 = _ratio(t_ckv, t_cli), _ratio(t_ckv, t_cli_1)
        print(f"  CLI default / Checkov:         {r0[0]:6.1f}x ({r0[1]:.1f}x)  (target >= 20x)")
        print(f"  CLI --jobs 1 / Checkov:        {r1[0]:6.1f}x ({r1[1]:.1f}x)")
    else:
        print("  CLI / Checkov:                 not measured (no Checkov)")
    print(f"  check FILE: {w1:.3f} s wall ({c1:.3f} s CPU), the interpreter {wp:.3f} s")


if __name__ == "__main__":
    main()

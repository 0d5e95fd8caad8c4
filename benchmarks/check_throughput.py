"""Throughput of ``shmguard check`` over ../shared/corpus against Checkov and a bare PyYAML parse.

Prints files/s and MB/s for:

1. a bare ``yaml.compose_all(CSafeLoader)`` over every YAML file of corpus/compose and
   corpus/k8s (the floor any YAML linter pays);
2. ``shmguard check`` in-process on the library (``load_bytes`` + ``check_loaded``: sources,
   workload detection, every SHM rule, fixes computed), on the same YAML files and on the
   334 ``docker run`` lines of corpus/docker_run_lines.tsv (each one a ``.sh`` file);
3. the ``shmguard check`` CLI as a subprocess (interpreter start-up included) on copies of the
   YAML files, as run by default (``--jobs 0``: one worker process per usable CPU, at most one
   per 64 files; the number is on the row) and with ``--jobs 1`` (one process, in turns with
   the default), and on the YAML files plus the run lines;
4. Checkov (``checkov --skip-download --framework kubernetes -d DIR``) on the same copies, from
   its own virtual environment. Checkov has no Compose framework: its kubernetes runner reads
   every ``.yaml``/``.yml`` and keeps the documents with ``apiVersion`` and ``kind``.

Each row is the best wall-clock time of ``--repeat`` runs (Checkov: at most 2), with the CPU
seconds of that run (this process and its children: user + system), which a busy machine
disturbs less; the bare parse and the library check run in turns (bare, check, bare, ...), so
a busy spell falls on both. On the shared 2-CPU development machine single runs moved by up to
40 %: compare versions by medians of several alternated runs (docs/check.md, "Speed", has the
figures measured for issue 8: library 90.5 % of the bare parse, 64.4 % in CPU time; CLI 14.8x
Checkov, 19.4x in CPU time; benchmarks/results/check_throughput_2026-12-01.txt the runs).
Then the ratios against issue 8's targets: check at least 20x Checkov (CLI against CLI, both
on the same files with start-up, each using the CPUs it uses by default: Checkov runs several
processes too) and at least 60 % of the bare parse (library on YAML files); the load average at
the start and the end is printed, since other work on the machine moves every figure.
Files are copied to a temporary directory first: Checkov 3.3.30 found no resource at all when
given the corpus's own path (0 resources from ``-d ../shared/corpus/k8s``; the same files
copied to /tmp gave 1,851), so both CLIs read the copies. Both CLIs run from compiled bytecode,
as installed packages do (pip compiles them; Checkov's venv has its ``__pycache__``): for
``shmguard``, run from the source tree, ``PYTHONDONTWRITEBYTECODE`` (set on the development
machine) is dropped and ``PYTHONPYCACHEPREFIX`` points into the temporary directory, filled by
one untimed run first; compiling its modules again on every run cost 0.15-0.2 s here.

Checkov's environment (the PyPI package, kept apart from the project's)::

    python3 -m venv /tmp/checkov-venv && /tmp/checkov-venv/bin/pip install checkov==3.3.30

    python benchmarks/check_throughput.py [--repeat N] [--checkov PATH | --no-checkov]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from shmguard.lint.check import check_loaded
from shmguard.lint.check_files import jobs_for, usable_cpus
from shmguard.sources.load import load_bytes

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
CHECKOV = "/tmp/checkov-venv/bin/checkov"

Files = list[tuple[str, bytes]]


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


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best wall-clock seconds of ``repeat`` runs, and the CPU seconds of that run."""
    runs = []
    for _ in range(repeat):
        t, c = time.perf_counter(), _cpu()
        fn()
        runs.append((time.perf_counter() - t, _cpu() - c))
    return min(runs)


def _best_interleaved(fns: list[Callable[[], object]], repeat: int) -> list[tuple[float, float]]:
    """:func:`_best` of each of ``fns``, run in turns (a, b, a, b, ...) so that a busy spell of
    the machine falls on all of them alike: their ratio moves less than with a, a, b, b."""
    runs: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t, c = time.perf_counter(), _cpu()
            fn()
            runs[i].append((time.perf_counter() - t, _cpu() - c))
    return [min(r) for r in runs]


def _row(label: str, n: int, nbytes: int, timing: tuple[float, float]) -> None:
    seconds, cpu = timing
    print(
        f"{label:46s} {n / seconds:9.0f} files/s {nbytes / 1e6 / seconds:8.2f} MB/s "
        f"{seconds:8.3f} s wall {cpu:8.3f} s CPU  ({n} files, {nbytes / 1e6:.2f} MB)"
    )


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1):
        sys.exit(f"{args[0]} exited {r.returncode}: {r.stderr.decode()[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; best kept")
    ap.add_argument("--checkov", default=CHECKOV, help=f"Checkov executable ({CHECKOV})")
    ap.add_argument("--no-checkov", action="store_true", help="skip Checkov")
    args = ap.parse_args()

    paths = sorted(p for k in ("compose", "k8s") for p in (CORPUS / k).rglob("*") if p.is_file())
    yaml_files = [(str(p), p.read_bytes()) for p in paths]
    with (CORPUS / "docker_run_lines.tsv").open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    run_files = [(f"{i:04d}.sh", (r["command"] + "\n").encode()) for i, r in enumerate(rows)]
    ny, by = len(yaml_files), sum(len(d) for _, d in yaml_files)
    nr, br = len(run_files), sum(len(d) for _, d in run_files)
    print(f"corpus: {ny} YAML files ({by / 1e6:.2f} MB), {nr} docker run lines ({br / 1e3:.1f} kB)")
    print(f"python {sys.version.split()[0]}, PyYAML {yaml.__version__}, best of {args.repeat}")
    jobs = jobs_for(0, [f for f, _ in yaml_files], fix=False)
    jobs_all = jobs_for(0, [f for f, _ in yaml_files + run_files], fix=False)
    print(f"usable CPUs {usable_cpus()}; load average at the start {_load()}\n")

    t_bare, t_lib = _best_interleaved(
        [lambda: _bare(yaml_files), lambda: _check(yaml_files)], args.repeat
    )
    _row("bare yaml.compose_all(CSafeLoader)", ny, by, t_bare)
    _row("shmguard check, library, YAML", ny, by, t_lib)
    t_lib_run = _best(lambda: _check(run_files), args.repeat)
    _row("shmguard check, library, run lines", nr, br, t_lib_run)

    with tempfile.TemporaryDirectory(prefix="check-throughput-") as tmp:
        root = Path(tmp)
        ydir = root / "yaml"
        for k in ("compose", "k8s"):
            shutil.copytree(CORPUS / k, ydir / k)
        rdir = root / "runlines"
        rdir.mkdir()
        for name, data in run_files:
            (rdir / name).write_bytes(data)
        shmguard = [sys.executable, "-m", "shmguard", "check", "--fail-on", "never"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        _cli([*shmguard, str(ydir), str(rdir)], root, env)  # compiles the bytecode
        serial = [*shmguard, "--jobs", "1"]
        t_cli, t_cli_1 = _best_interleaved(
            [
                lambda: _cli([*shmguard, str(ydir)], root, env),
                lambda: _cli([*serial, str(ydir)], root, env),
            ],
            args.repeat,
        )
        _row(f"shmguard check CLI, YAML ({jobs} jobs)", ny, by, t_cli)
        _row("shmguard check CLI, YAML, --jobs 1", ny, by, t_cli_1)
        t_cli_all = _best(lambda: _cli([*shmguard, str(ydir), str(rdir)], root, env), args.repeat)
        _row(f"shmguard check CLI, YAML + run lines ({jobs_all} jobs)", ny + nr, by + br, t_cli_all)

        t_ckv: tuple[float, float] | None = None
        if args.no_checkov:
            print("Checkov: skipped (--no-checkov)")
        elif not (shutil.which(args.checkov) or os.access(args.checkov, os.X_OK)):
            print(f"Checkov: {args.checkov} not found; install it as this script's docstring says")
        else:
            ckv = [args.checkov, "--skip-download", "--framework", "kubernetes"]
            ckv += ["--quiet", "--compact", "-o", "json", "-d", str(ydir)]
            t_ckv = _best(lambda: _cli(ckv, root), min(args.repeat, 2))
            _row("checkov --framework kubernetes, YAML", ny, by, t_ckv)

    print(f"\nload average at the end {_load()}")
    print("ratios of wall-clock throughput (CPU time in brackets):")
    print(f"check library / bare parse (YAML): {_ratio(t_bare, t_lib, '%')}  (target >= 60%)")
    if t_ckv is not None:
        print(f"check CLI / Checkov (YAML):        {_ratio(t_ckv, t_cli, 'x')}  (target >= 20x)")
        print(f"check CLI --jobs 1 / Checkov:      {_ratio(t_ckv, t_cli_1, 'x')}")
        print(f"check library / Checkov (YAML):    {_ratio(t_ckv, t_lib, 'x')}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _ratio(a: tuple[float, float], b: tuple[float, float], unit: str) -> str:
    """How many times faster ``b`` is than ``a``: wall and (CPU)."""
    if unit == "%":
        return f"{a[0] / b[0]:6.1%} ({a[1] / b[1]:.1%})"
    return f"{a[0] / b[0]:6.1f}x ({a[1] / b[1]:.1f}x)"


if __name__ == "__main__":
    main()

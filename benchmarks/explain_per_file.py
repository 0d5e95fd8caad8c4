#!/usr/bin/env python3
"""`shmguard explain --per-file` over many logs, against one `shmguard explain FILE` per log.

Copies the fixture logs of tests/fixtures/logs (the held-out corpus is not among them) into a
temporary directory, N files in all, then, in the same command:

* `shmguard explain --per-file [--json] FILE...` (the real CLI, a subprocess) for a few file
  counts: wall time and peak RSS (VmHWM), and a check that every file got its diagnosis;
  `shmguard explain --json FILE...` (all files one incident) as the baseline for memory;
* one `shmguard explain FILE` process per file for the smallest count: the ratio.

Peak RSS must stay about flat from the smallest to the largest count, growing no more than
the one-incident baseline's (which also holds every file name): files are read one at a time
and no diagnosis is kept.
Usage: python benchmarks/explain_per_file.py [--counts 10,200,2000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "logs"


# The child reports its own peak RSS (VmHWM of its address space, proc(5)) as its last stderr
# line. wait4's ru_maxrss would not do: Linux carries the high-water mark of the address space
# a process had before execve into it (fs/exec.c setmax_mm_hiwater_rss), i.e. this script's,
# which grows with the outputs it has parsed.
RUN_CLI = """
import atexit, sys
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            sys.stderr.write('\\n' + line.split()[1] + '\\n')
atexit.register(hwm)
from shmguard.cli import main
main()
"""


def explain(args: list[str]) -> tuple[float, int, bytes]:
    """Run the CLI; return wall seconds, its peak RSS in bytes, its stdout."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO / "src")}
    cmd = [sys.executable, "-c", RUN_CLI, "explain", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"explain exited {done.returncode}: {done.stderr.decode()[-300:]}")
    return wall, int(done.stderr.split()[-1]) * 1024, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="10,200,2000", help="file counts, comma-separated")
    counts = sorted(int(c) for c in ap.parse_args().counts.split(","))
    logs = [p for p in sorted(FIXTURES.rglob("*")) if p.suffix in (".txt", ".log")]
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(counts[-1]):
            src = logs[i % len(logs)]
            dst = Path(tmp) / f"{i:05d}_{src.name}"
            shutil.copyfile(src, dst)
            files.append(str(dst))
        total = sum(os.path.getsize(f) for f in files)
        print(f"{len(logs)} fixture logs copied to {counts[-1]} files, {total:,} bytes")
        print("  files  mode                       wall s  peak RSS MiB")
        for n in counts:
            for mode in (["--per-file"], ["--per-file", "--json"], ["--json"]):
                wall, rss, out = explain([*mode, *files[:n]])
                if mode == ["--json"]:
                    assert len(json.loads(out)["inputs"]) == n
                elif "--json" in mode:
                    got = [f["file"] for f in json.loads(out)["files"]]
                    assert got == files[:n], "a file is missing from --per-file --json"
                else:
                    assert out.count(b"\n==> ") == n - 1, "a section is missing"
                name = " ".join(mode) if "--per-file" in mode else "--json (one incident)"
                print(f"{n:7d}  {name:25s} {wall:7.2f}  {rss / 2**20:12.1f}")
        n = counts[0]
        start = time.perf_counter()
        for f in files[:n]:
            explain([f])
        separate = time.perf_counter() - start
        per_file, _, _ = explain(["--per-file", *files[:n]])
        print(
            f"{n} files: {n} separate runs {separate:.2f} s, one --per-file run "
            f"{per_file:.2f} s ({separate / per_file:.1f}x faster)"
        )


if __name__ == "__main__":
    main()

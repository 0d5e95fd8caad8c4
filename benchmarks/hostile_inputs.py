"""Time and peak memory of ``shmguard check`` on the hostile inputs of issue 24 item 3.

Each input is generated into a temporary directory and checked by the CLI in a child process
(``python -m shmguard check --format json FILE``; the exit status is not judged); the row is its
wall-clock time (and CPU time, the workers it forks included) and the child's peak RSS (from
``os.wait4``: the largest of it and the workers it forked for a stream, not their sum, which
benchmarks/check_rss.py prints). Inputs:

* ``list-plain`` / ``list-anchor``: a ``kind: List`` of N Pods, without and with one
  ``&anchor`` (and its ``*alias``) in the first Pod: an anchor must not make each Pod walk
  the whole document (target: within 2x);
* ``runlines-small`` / ``runlines-large``: a shell script of 5,000 and 20,000 ``docker run``
  lines of an ML image, each a finding: positions must come from a line index, not a count
  from the start of the file (target: 4x the lines within 5x the time);
* ``long-runline``: one 7 MB ``docker run`` line (target under 200 MB), full mode only;
* ``pod-stream``: a 15 MB stream of ~96k Pods (``---`` separated; target under 20 s and
  600 MB), full mode only.

``--quick`` uses 500 Pods, 1,250 and 5,000 run lines and skips the two big inputs (a few
seconds on a free core). Run from the tree to measure (``PYTHONPATH=src``); ``--src DIR``
runs another checkout's ``src`` (``--src /work/main/src``, for a before/after); ``--no-big``
runs the full sizes without the two big inputs; ``--only NAME`` (repeatable) runs only the
inputs named, big ones included (``--only pod-stream``), and the ratios whose inputs ran;
``--fix`` runs ``check --fix`` on each input.

    python benchmarks/hostile_inputs.py [--quick | --no-big] [--only NAME] [--fix] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POD = """  - apiVersion: v1
    kind: Pod
    metadata:
      name: train-{i}
      labels: {{app: train}}
    spec:
      containers:
      - name: train
        image: pytorch/pytorch:2.3.0
        command: ["python", "train.py", "--num-workers", "8"]
        resources:
          limits: {{memory: 16Gi}}
"""
ANCHORED = """  - apiVersion: v1
    kind: Pod
    metadata:
      name: train-a
      labels: &labels {app: train}
    spec:
      containers:
      - name: train
        image: pytorch/pytorch:2.3.0
        resources:
          limits: {memory: 16Gi}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: train-b
      labels: *labels
    spec:
      containers:
      - name: train
        image: pytorch/pytorch:2.3.0
"""
STREAM_POD = """apiVersion: v1
kind: Pod
metadata:
  name: p-{i}
spec:
  containers:
  - name: c
    image: pytorch/pytorch:2.3.0
    resources: {{limits: {{memory: 8Gi}}}}
---
"""
RUN = "docker run --gpus all pytorch/pytorch:2.3.0 python train.py --epochs {i}\n"


def pod_list(pods: int, anchor: bool) -> str:
    head = "apiVersion: v1\nkind: List\nitems:\n"
    body = [ANCHORED] if anchor else [POD.format(i="a"), POD.format(i="b")]
    body += [POD.format(i=i) for i in range(pods - 2)]
    return head + "".join(body)


def run_lines(n: int) -> str:
    return "#!/bin/sh\nset -e\n" + "".join(RUN.format(i=i) for i in range(n))


def pod_stream(megabytes: float) -> str:
    per = len(STREAM_POD.format(i=0))
    return "".join(STREAM_POD.format(i=i) for i in range(int(megabytes * 1e6 / per)))


def long_run_line(megabytes: float) -> str:
    parts, size, i = [], 0, 0
    while size < megabytes * 1e6:
        part = f"-e V{i}=x"
        parts.append(part)
        size += len(part) + 1
        i += 1
    return f"#!/bin/sh\ndocker run {' '.join(parts)} pytorch/pytorch:2.3.0 python train.py\n"


def measure(path: Path, src: str, fix: bool = False) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds: user + system) of the child, one ``check``
    (``--fix``: in place) of ``path`` (the CPU time moves less than the wall clock when other
    work shares the CPUs)."""
    env = dict(os.environ, PYTHONPATH=src)
    t0 = time.perf_counter()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shmguard",
            "check",
            *(["--fix"] * fix),
            "--format",
            "json",
            str(path),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage, not the most so far
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait again
    wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, no big inputs")
    ap.add_argument("--no-big", action="store_true", help="full sizes, without the two big inputs")
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this input")
    ap.add_argument("--fix", action="store_true", help="run check --fix on each input")
    args = ap.parse_args()
    pods, small, large = (500, 1250, 5000) if args.quick else (2000, 5000, 20000)
    inputs = [
        ("list-plain", "list-plain.yaml", lambda: pod_list(pods, False)),
        ("list-anchor", "list-anchor.yaml", lambda: pod_list(pods, True)),
        ("runlines-small", "small.sh", lambda: run_lines(small)),
        ("runlines-large", "large.sh", lambda: run_lines(large)),
    ]
    if args.only or not (args.quick or args.no_big):
        inputs += [
            ("long-runline", "long.sh", lambda: long_run_line(7)),
            ("pod-stream", "stream.yaml", lambda: pod_stream(15)),
        ]
    if args.only:
        unknown = set(args.only) - {name for name, _, _ in inputs}
        if unknown:
            ap.error(f"unknown input {', '.join(sorted(unknown))}")
        inputs = [i for i in inputs if i[0] in args.only]
    print(f"src: {args.src}; load average {os.getloadavg()[0]:.2f}")
    times: dict[str, float] = {}
    peaks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, file, make in inputs:
            path = Path(tmp) / file
            path.write_text(make())
            wall, rss, cpu = measure(path, args.src, args.fix)
            times[name] = wall
            peaks[name] = rss
            size = path.stat().st_size / 1e6
            print(
                f"{name:15s} {size:7.2f} MB  {wall:8.2f} s ({cpu:6.2f} s CPU)  "
                f"peak RSS {rss:7.1f} MB"
            )
    if "list-anchor" in times and "list-plain" in times:
        print(
            f"ratio anchor/plain ({pods} Pods): {times['list-anchor'] / times['list-plain']:.2f} "
            "(target <= 2)"
        )
    if "runlines-large" in times and "runlines-small" in times:
        print(
            f"ratio {large}/{small} run lines: "
            f"{times['runlines-large'] / times['runlines-small']:.2f} (target <= 5)"
        )
    if "long-runline" in times:
        print(f"long-runline: peak RSS {peaks['long-runline']:.1f} MB (target < 200 MB)")
    if "pod-stream" in times:
        print(
            f"pod-stream: {times['pod-stream']:.2f} s (target < 20 s), "
            f"peak RSS {peaks['pod-stream']:.1f} MB (target < 600 MB)"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

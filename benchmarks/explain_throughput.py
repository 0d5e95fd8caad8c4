#!/usr/bin/env python3
"""Throughput and memory of `shmguard explain` against `LC_ALL=C grep -E` on the same log.

Generates a log of noise (training-step lines, NCCL INFO lines, progress bars, kubectl-style
timestamps) with a few real failures inside (torch 2.13 outputs and public reports from
tests/fixtures/logs), in a tmpfs: /dev/shm when it has room, else a private tmpfs mounted in
a new mount namespace (root + unshare). Then, in the same command:

* `shmguard explain --json FILE` (the real CLI, a subprocess): MB/s and peak RSS (wait4);
  checks that the planted failures were found;
* `LC_ALL=C grep -E -c -f PATTERNS FILE` with the catalogue's patterns translated to POSIX
  ERE (the literal where a regex uses Python-only syntax): MB/s;
* the ratio of their times, explain's over grep's (column "explain/grep time"; below 1:
  explain is faster, the inverse of the MB/s ratio), for each size given
  (default 256M and 1G: memory must not grow).

Target (issue 10): at 1 GiB explain reads at least as fast as grep (ratio <= 1.00x), and its
peak RSS is the same at 256 MiB and 1 GiB (memory flat).
Usage: python benchmarks/explain_throughput.py [--sizes 256M,1G] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "logs"
MB = 1_000_000


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise SystemExit(f"bad size {text!r}: use e.g. 256M or 1G")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]


def failures() -> list[bytes]:
    """Real failure texts to plant: torch 2.13 outputs and a few public reports."""
    out = [p.read_bytes() for p in sorted((FIXTURES / "torch_2.13").glob("S0[19]*.txt"))]
    out += [p.read_bytes() for p in sorted((FIXTURES / "torch_2.13").glob("S11*.txt"))]
    cases = [json.loads(x) for x in (FIXTURES / "public_reports.jsonl").read_text().splitlines()]
    want = {"torchtitan-853-ci-16mb", "k8s-28272-dshm-evicted", "bevfusion-351-jetson-killed"}
    out += [c["log"].encode() + b"\n" for c in cases if c["id"] in want]
    return out


def noise_block(rng: random.Random, n_lines: int) -> bytes:
    words = (
        b"epoch step loss lr grad_norm tokens/s samples/s mem_alloc reserved data_time "
        b"iter_time eta ckpt saved eval acc top1 top5 rank node warmup cosine"
    ).split()
    lines = []
    for i in range(n_lines):
        r = rng.random()
        if r < 0.6:
            lines.append(
                b"2026-11-30T09:%02d:%02d.%06dZ INFO [rank%d] %s %d %s %.5f %s %.3e"
                % (
                    i % 60,
                    (i * 7) % 60,
                    i % 999_999,
                    i % 8,
                    rng.choice(words),
                    i,
                    rng.choice(words),
                    rng.random(),
                    rng.choice(words),
                    rng.random(),
                )
            )
        elif r < 0.8:
            lines.append(
                b"host%d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/IPC/read"
                % (
                    i % 4,
                    1000 + i % 97,
                    2000 + i % 89,
                    i % 8,
                    i % 32,
                    i % 8,
                    i % 8,
                    (i + 1) % 8,
                    (i + 1) % 8,
                )
            )
        elif r < 0.9:
            lines.append(
                b"Epoch %d:  %d%%|%s| %d/%d [01:%02d<02:%02d,  %.2fit/s, loss=%.4f]"
                % (
                    i % 90,
                    i % 100,
                    b"#" * (i % 10),
                    i,
                    10_000,
                    i % 60,
                    i % 60,
                    rng.random() * 9,
                    rng.random(),
                )
            )
        else:
            lines.append(
                b'  File "/opt/venv/lib/python3.11/site-packages/x/y.py", line %d, in f%d'
                % (i, i % 13)
            )
    return b"\n".join(lines) + b"\n"


def make_log(path: Path, size: int, seed: int = 4) -> list[int]:
    """Write ``size`` bytes of noise with the failures planted at fixed fractions; return the
    byte offsets where they start."""
    rng = random.Random(seed)
    blocks = [noise_block(rng, 20_000) for _ in range(8)]
    planted = failures()
    marks = [int(size * f) for f in (0.11, 0.37, 0.52, 0.68, 0.83, 0.97)][: len(planted)]
    offsets = []
    written = 0
    k = 0
    with path.open("wb") as f:
        while written < size:
            if k < len(marks) and written >= marks[k]:
                offsets.append(written)
                f.write(planted[k])
                written += len(planted[k])
                k += 1
                continue
            b = blocks[rng.randrange(len(blocks))]
            stop = min(size, marks[k]) if k < len(marks) else size
            if written + len(b) > stop:
                # Cut at a line end so the next failure starts on a line of its own.
                cut = b.rfind(b"\n", 0, stop - written) + 1
                b = b[: cut or stop - written]
            f.write(b)
            written += len(b)
    return offsets


def ere_patterns() -> tuple[list[str], int]:
    """The catalogue's regexes as POSIX ERE for grep -E; the literal when a regex uses syntax
    ERE lacks (look-arounds, inline flags). Returns (patterns, how many were translated)."""
    sys.path.insert(0, str(REPO / "src"))
    from shmguard.triage import load_catalogue

    out, translated = [], 0
    for s in load_catalogue():
        for p in s.patterns:
            rx = p.regex.pattern
            if re.search(r"\(\?[=!<i]|\(\?<[=!]", rx) is None:
                e = re.sub(r"\(\?P<\w+>", "(", rx).replace("(?:", "(")
                e = (
                    e.replace(r"\d", "[0-9]")
                    .replace(r"\s", "[[:space:]]")
                    .replace(r"\S", "[^[:space:]]")
                )
                e = e.replace(r"\w", "[[:alnum:]_]")
                try:
                    subprocess.run(
                        ["grep", "-E", "-c", "--", e, "/dev/null"],
                        capture_output=True,
                        check=False,
                        timeout=10,
                    )
                    out.append(e)
                    translated += 1
                    continue
                except (OSError, subprocess.SubprocessError):
                    pass
            out.append(re.sub(r"([][.*+?(){}|^$\\])", r"\\\1", p.literal.decode()))
    return out, translated


#: The CLI, started so that at exit it writes its own peak RSS (``VmHWM`` of
#: /proc/self/status, kibibytes; proc(5)) to the file named by $BENCH_HWM_FILE.
CLI_WITH_HWM = (
    "import atexit, os\n"
    "def _hwm(path=os.environ['BENCH_HWM_FILE']):\n"
    "    with open('/proc/self/status') as s, open(path, 'w') as o:\n"
    "        o.write(next(x for x in s if x.startswith('VmHWM:')))\n"
    "atexit.register(_hwm)\n"
    "from shmguard.cli import main\n"
    "main()\n"
)


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, int, bytes, int]:
    """Wall seconds, peak RSS bytes, stdout and exit status of one command.

    The peak RSS is the command's own when it is :data:`CLI_WITH_HWM` (its VmHWM, counted from
    its exec), else wait4's ``ru_maxrss``, which is at least this benchmark's own RSS: Linux
    folds the pre-exec (forked or vforked) address space's high-water mark into the new
    program's ``maxrss`` (``exec_mmap()`` in fs/exec.c calls ``setmax_mm_hiwater_rss``).
    """
    with tempfile.NamedTemporaryFile(prefix="shmguard-bench-hwm-") as hwm:
        env = {**env, "BENCH_HWM_FILE": hwm.name}
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        out = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        own = Path(hwm.name).read_text().split()
    peak = int(own[1]) * 1024 if len(own) == 3 and own[2] == "kB" else usage.ru_maxrss * 1024
    return dt, peak, out, proc.returncode


def bench(directory: Path, sizes: list[int]) -> None:
    pats, translated = ere_patterns()
    pat_file = directory / "patterns.ere"
    pat_file.write_text("\n".join(pats) + "\n")
    env = {**os.environ, "LC_ALL": "C", "NO_COLOR": "1"}
    empty = directory / "empty.log"
    empty.write_bytes(b"")
    cli = [sys.executable, "-c", CLI_WITH_HWM, "explain", "--json"]
    t_start, rss_start, _, _ = run_measured([*cli, str(empty)], env)
    print(f"startup (empty log): {t_start:.2f} s, peak RSS {rss_start / 1024**2:.1f} MiB")
    print(
        f"catalogue patterns for grep: {len(pats)} "
        f"({translated} translated to ERE, the rest as literals)"
    )
    print(
        f"{'size':>8} {'explain MB/s':>13} {'grep MB/s':>10} {'explain/grep time':>18} "
        f"{'explain peak RSS':>17} {'found':>6}"
    )
    for size in sizes:
        log = directory / f"bench_{size}.log"
        offsets = make_log(log, size)
        shmguard = [*cli, str(log)]
        t_ex, rss, out, code = run_measured(shmguard, env)
        found = json.loads(out)
        ids = {r["id"] for r in found["results"]}
        expected = {
            "torch-shm-alloc-failed",
            "dataloader-feeder-failure",
            "dataloader-bus-error",
            "nccl-shm-segment",
            "k8s-emptydir-evicted",
            "memory-oom-kill",
        }
        ok = expected <= ids and code == 1
        t_gr, _, _, _ = run_measured(["grep", "-E", "-c", "-f", str(pat_file), str(log)], env)
        print(
            f"{size / 1024**2:>7.0f}M {size / MB / t_ex:>13.1f} {size / MB / t_gr:>10.1f} "
            f"{t_ex / t_gr:>17.2f}x {rss / 1024**2:>14.1f} MiB {'yes' if ok else 'NO':>6}"
        )
        if not ok:
            print(f"  missing: {sorted(expected - ids)}; planted at byte offsets {offsets}")
        log.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256M,1G", help="comma-separated sizes (default 256M,1G)")
    ap.add_argument("--dir", type=Path, help="a tmpfs directory to write the logs in")
    ap.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    need = max(sizes) + 64 * 1024**2
    if args.dir is not None:
        bench(args.dir, sizes)
        return
    free = shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else 0
    if free >= need:
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="shmguard-bench-") as d:
            print(f"log directory: {d} (tmpfs /dev/shm, {free / 1024**3:.1f} GiB free)")
            bench(Path(d), sizes)
        return
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SystemExit(f"/dev/shm has {free} bytes free, {need} needed; pass --dir on a tmpfs")
    # A private tmpfs in a new mount namespace: gone when the namespace's last process exits.
    with tempfile.TemporaryDirectory(prefix="shmguard-bench-") as d:
        print(f"log directory: {d} (private tmpfs in a new mount namespace)")
        script = (
            f"mount -t tmpfs -o size={need} tmpfs {d} && "
            f"exec {sys.executable} {Path(__file__).resolve()} "
            f"--sizes {args.sizes} --dir {d}"
        )
        subprocess.run(["unshare", "--mount", "--fork", "sh", "-c", script], check=True)


if __name__ == "__main__":
    main()

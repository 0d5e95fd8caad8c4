"""How long one scan_holders() takes next to a DataLoader-like holder, against psutil.

Starts a process in a private mount namespace (root + unshare) whose fresh tmpfs /dev/shm holds
``--files`` unlinked files through fds and mappings (torch's fd strategy) and 3*nw+8 mapped
semaphores, then times, in this same process:

* ``scan_holders()`` over the whole /proc (what the sampler does), and
* a psutil baseline: ``process_iter`` + ``open_files()`` + ``memory_maps()`` per process, which
  is what one would write with psutil (it cannot even see deleted files through
  ``open_files()``, so it only finds them through maps).

Prints the medians and the ratio. Run: ``python benchmarks/holders_scan.py [--files N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import psutil

from shmguard.inspect.holders import scan_holders

HOLDER = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
n, nsem = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    path = f"/dev/shm/torch_{os.getpid()}_1_{i}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.posix_fallocate(fd, 0, 65536)
    libc.mmap(None, 65536, 3, 1, fd, 0)
    os.unlink(path)
for i in range(nsem):
    path = f"/dev/shm/sem.mp-{i}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.posix_fallocate(fd, 0, 4096)
    libc.mmap(None, 4096, 3, 1, fd, 0)
    os.unlink(path)
    os.close(fd)
print(json.dumps({"pid": os.getpid()}), flush=True)
sys.stdin.read()
"""


def psutil_scan() -> int:
    """The psutil way: bytes of /dev/shm files per process (deleted ones only through maps)."""
    seen: dict[str, int] = {}
    for proc in psutil.process_iter():
        try:
            for f in proc.open_files():
                if f.path.startswith("/dev/shm/"):
                    seen[f.path] = os.stat(f.path).st_blocks * 512
            for m in proc.memory_maps(grouped=True):
                if m.path.startswith("/dev/shm/"):
                    seen.setdefault(m.path, m.rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, FileNotFoundError):
            continue
    return sum(seen.values())


def timed(fn: object, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=300, help="unlinked shm files held (default 300)")
    ap.add_argument("--workers", type=int, default=8, help="nw for 3*nw+8 semaphores")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    cmd = (
        "mount -t tmpfs -o size=1g tmpfs /dev/shm && "
        f'exec "{sys.executable}" -c "$H" {args.files} {3 * args.workers + 8}'
    )
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, H=HOLDER),
    )
    try:
        assert holder.stdout is not None
        pid = json.loads(holder.stdout.readline())["pid"]
        scan = scan_holders()
        held = next(p for p in scan.processes if p.pid == pid)
        ours = timed(scan_holders, args.repeat)
        theirs = timed(psutil_scan, max(3, args.repeat // 3))
        one = timed(lambda: scan_holders(pids=[pid]), args.repeat)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    a, b, c = statistics.median(ours), statistics.median(theirs), statistics.median(one)
    print(f"processes on host: {len(psutil.pids())}; holder files: {len(held.files)}")
    print(f"scan_holders() all of /proc     median {a * 1e3:8.2f} ms")
    print(f"scan_holders(pids=[holder])     median {c * 1e3:8.2f} ms")
    print(f"psutil open_files+memory_maps   median {b * 1e3:8.2f} ms")
    print(f"ratio psutil / scan_holders: {b / a:.1f}x")


if __name__ == "__main__":
    main()

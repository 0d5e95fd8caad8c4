"""Peak memory of ``shmguard check`` with the processes it forks: run ``shmguard check ARGS``
in this process and print, on standard error, the wall clock, the CPU time (this process's and
its reaped children's, user + system), and the peak RSS of this process and the largest of its
children (``getrusage`` ``RUSAGE_SELF`` and ``RUSAGE_CHILDREN``), with their sum.

With one worker (two processes: a stream checked with ``--jobs 2`` or automatic on two CPUs)
the sum is the two processes' peaks added, an upper bound of their peak together (pages shared
since the fork count in both). ``os.wait4`` on the command, as benchmarks/hostile_inputs.py
does, gives the largest of them instead. Usage::

    PYTHONPATH=src python benchmarks/check_rss.py --format json stream.yaml > /dev/null
"""

from __future__ import annotations

import os
import resource
import runpy
import sys
import time


def main() -> None:
    t0 = time.perf_counter()
    sys.argv = ["shmguard", "check", *sys.argv[1:]]
    code: object = 0
    try:
        runpy.run_module("shmguard", run_name="__main__")
    except SystemExit as done:
        code = done.code
    wall = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    mine, theirs = me.ru_maxrss / 1024, kids.ru_maxrss / 1024  # KiB on Linux
    line = (
        f"wall {wall:.2f} s, CPU {cpu:.2f} s, peak RSS {mine:.1f} MB here + {theirs:.1f} MB "
        f"(largest worker) = {mine + theirs:.1f} MB, exit {code}, "
        f"load {os.getloadavg()[0]:.2f}\n"
    )
    sys.stdout.flush()
    os.write(2, line.encode())


if __name__ == "__main__":
    main()

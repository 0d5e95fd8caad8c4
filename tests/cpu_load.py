"""Load the CPU while a timing-dependent measurement runs (issue 24 item 9).

``busy_loops(2)`` starts two processes that spin until the block ends; they are this test's
own children (their pids are checked gone at the end), so nothing outlives the test and no
other run on the machine is touched. Assertions made inside the block keep their exact
values: a measurement that only holds on an idle machine is the defect, not the tolerance.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "import os\nwhile os.getppid() != 1:\n    pass\n"


@contextmanager
def busy_loops(n: int = 2) -> Iterator[list[int]]:
    """Run ``n`` spinning processes for the duration of the block; yields their pids."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)

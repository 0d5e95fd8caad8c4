"""`shmguard watch | head` (issue 24 item 8): when the reader of standard output goes away, watch
ends quietly with 141 (128 + SIGPIPE, as a tool SIGPIPE ends), not 1, its "threshold crossed"
status, and prints no error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
WATCH = [sys.executable, "-m", "shmguard", "watch"]


def test_watch_exits_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    (tmp_path / "dev" / "shm").mkdir(parents=True)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: the first write gets EPIPE
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run(
        [*WATCH, "--interval", "50ms", "--container-root", str(tmp_path)],
        stdout=write,
        stderr=subprocess.PIPE,
        env=env,
        timeout=60,
        check=False,
    )
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == b""

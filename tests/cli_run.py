"""Run the real ``shmguard`` CLI in a child process, as a user's shell would, for tests that read
what it prints (its help, its version): one place for the call and its timeout."""

from __future__ import annotations

import os
import subprocess
import sys


def shmguard_out(*args: str, columns: int | None = None) -> str:
    """Standard output of ``python -m shmguard ARGS`` (exit 0 required), ``COLUMNS`` set when
    ``columns`` is given."""
    env = dict(os.environ) if columns is None else {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    return done.stdout

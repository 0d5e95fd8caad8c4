"""Helpers for inspect tests: real processes in private mount namespaces with their own tmpfs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def _can_unshare() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


class Holder:
    """A python script running in a private mount namespace whose /dev/shm is a fresh tmpfs.

    The script prints one JSON line when ready, then waits until stdin closes.
    """

    def __init__(self, script: str, size: str = "64m") -> None:
        cmd = (
            f"mount -t tmpfs -o size={size} tmpfs /dev/shm && "
            f'exec "{sys.executable}" -c "$HOLDER_SCRIPT"'
        )
        env = dict(os.environ, HOLDER_SCRIPT=script)
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise AssertionError(f"holder failed: {self.proc.stderr and self.proc.stderr.read()}")
        self.info: dict[str, Any] = json.loads(line)

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


@pytest.fixture
def holder() -> Iterator[type[Holder]]:
    """Start holders with ``holder(script, size)``; every one is stopped after the test."""
    if not _can_unshare():
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    started: list[Holder] = []

    class _Tracked(Holder):
        def __init__(self, script: str, size: str = "64m") -> None:
            super().__init__(script, size)
            started.append(self)

    yield _Tracked
    for h in started:
        h.close()

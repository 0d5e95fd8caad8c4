"""Run ``shmguard exporter`` as a real process on a free loopback port (tests, benchmark)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence


class ExporterProcess:
    """``python -m shmguard exporter --listen 127.0.0.1:0 ARGS`` with its URL once serving;
    ``env`` is added to the environment (POD_NAME and the like).

    Raises:
        RuntimeError: it exited or did not announce its address within ``timeout`` seconds.
    """

    def __init__(
        self,
        args: Sequence[str] = (),
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shmguard", "exporter", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        assert self.proc.stderr is not None
        end, line = time.monotonic() + timeout, b""
        while time.monotonic() < end and b"\n" not in line:
            ready, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if ready:
                chunk = self.proc.stderr.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    break
                line += chunk
        m = re.search(rb"serving (http://\S+/metrics)", line)
        if m is None:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"exporter did not start: {line!r}")
        self.url = m.group(1).decode()
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def scrape(self) -> str:
        """One GET of /metrics, the body as text."""
        with urllib.request.urlopen(self.url, timeout=10) as r:
            return r.read().decode()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then its exit status (SIGKILL after ``timeout`` seconds)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

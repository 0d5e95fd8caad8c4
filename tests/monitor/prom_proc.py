"""Run a real Prometheus 2.x (Debian package ``prometheus``) on a free loopback port with a
temporary config and data dir (tests, fixture recording); its HTTP API
(https://prometheus.io/docs/prometheus/latest/querying/api/) is read back with urllib."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from monitor_helpers import wait_for

PROMETHEUS = shutil.which("prometheus")
Headers = Sequence[tuple[str, str]]
#: Skip a test when the binary is missing.
NEEDS_PROMETHEUS = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (Debian package prometheus; .ci/run "
    "installs it)",
)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> bytes:
    """One GET, the body."""
    with urllib.request.urlopen(url, timeout=5) as r:
        return bytes(r.read())


class PrometheusProcess:
    """``prometheus`` on 127.0.0.1:<free port> with ``workdir``/prometheus.yml and
    ``workdir``/data; :meth:`scrape` points it at targets, :meth:`stop` ends it.

    Raises:
        RuntimeError: the binary is missing or the server was not ready within 60 s.
    """

    def __init__(self, workdir: Path, args: Sequence[str] = (), headers: Headers = ()) -> None:
        """``args``: more flags (``--web.route-prefix=/p``, then :attr:`url` ends in it);
        ``headers``: sent with the readiness check (an Authorization for basic auth)."""
        if PROMETHEUS is None:
            raise RuntimeError("the prometheus binary is not installed")
        port = free_port()
        self.config = workdir / "prometheus.yml"
        self.config.write_text("global: {}\nscrape_configs: []\n")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        prefix = next((a.split("=", 1)[1] for a in args if a.startswith("--web.route-prefix=")), "")
        self.url = f"http://127.0.0.1:{port}{prefix.rstrip('/')}"

        def ready() -> bool:
            req = urllib.request.Request(f"{self.url}/-/ready", headers=dict(headers))
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return bytes(r.read()).startswith(b"Prometheus Server is Ready")
            except OSError:
                return False

        if not wait_for(ready, timeout=60, every=0.2):
            self.stop()
            raise RuntimeError("prometheus did not become ready")

    def scrape(self, ports: Sequence[int], interval: str = "1s") -> None:
        """Scrape 127.0.0.1:PORT for each port every ``interval`` (config reload)."""
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
        self.config.write_text(
            f"global: {{scrape_interval: {interval}, scrape_timeout: {interval}, "
            f"evaluation_interval: {interval}}}\n"
            "scrape_configs:\n"
            "  - job_name: shmguard\n"
            f"    static_configs: [{{targets: [{targets}]}}]\n"
        )
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        urllib.request.urlopen(req, timeout=10).close()

    def query(self, expr: str) -> dict[str, Any]:
        """The decoded answer of one instant query now."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        data: dict[str, Any] = json.loads(get(url))
        return data

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 30 s."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

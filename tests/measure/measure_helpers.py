"""Shared helpers of the measure tests: "nothing left behind" checks."""

from __future__ import annotations

import os
from pathlib import Path

import psutil


def _my_cgroup_dirs() -> list[Path]:
    """This process's v1 memory and cpu cgroup directories (where sandboxes create children)."""
    dirs = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in ("memory", "cpu"):
            if c in controllers.split(","):
                d = Path("/sys/fs/cgroup") / c / path.lstrip("/")
                if d.is_dir():
                    dirs.append(d)
    return dirs


def leftover_cgroups() -> list[str]:
    """``shmguard-*`` cgroup directories under this process's cgroups."""
    return sorted(str(p) for d in _my_cgroup_dirs() for p in d.glob("shmguard-*"))


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (excluding this process)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if marker in cmd and proc.pid != os.getpid():
            found.append(proc.pid)
    return found

"""Shared helpers of the measure tests: "nothing left behind" checks."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
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


@contextmanager
def own_cgroups() -> Iterator[list[Path] | None]:
    """Run the body in cgroups of its own, so that a leak check counts only the test's cgroups.

    Moves this process (all its threads: ``cgroup.procs``) into a fresh child of each of its v1
    memory and cpu cgroups; the sandboxes the test starts, in this process or in a CLI
    subprocess it runs, create their ``shmguard-*`` directories there, and another shmguard run
    sharing the machine creates its own elsewhere. Yields those cgroups, or None where they
    cannot be made (not root, no v1 controller): the caller then compares the global listing.
    On leaving, the process moves back and the cgroups are removed; a ``shmguard-*`` directory
    the test left in them is removed too (the caller has read them first).
    """
    mine = [d for d in _my_cgroup_dirs() if os.access(d / "cgroup.procs", os.W_OK)]
    if os.geteuid() != 0 or not mine:
        yield None
        return
    name = f"pytest-leakcheck-{os.getpid()}-{secrets.token_hex(4)}"
    made: list[tuple[Path, Path]] = []
    try:
        for d in mine:
            (d / name).mkdir()
            made.append((d, d / name))
            (d / name / "cgroup.procs").write_text(f"{os.getpid()}\n")
        yield [m for _, m in made]
    finally:
        for home, m in made:
            (home / "cgroup.procs").write_text(f"{os.getpid()}\n")
            for child in m.glob("shmguard-*"):
                _move_out(child, home)
                child.rmdir()
            _move_out(m, home)
            m.rmdir()


def _move_out(group: Path, home: Path) -> None:
    """Move any process still in ``group`` to ``home`` (a leaked process fails elsewhere)."""
    for pid in (group / "cgroup.procs").read_text().split():
        with suppress(ProcessLookupError):
            (home / "cgroup.procs").write_text(f"{pid}\n")


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (excluding this process)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if marker in cmd and proc.pid != os.getpid():
            found.append(proc.pid)
    return found

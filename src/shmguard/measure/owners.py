"""The sampler's slow loop: who holds /dev/shm, the process tree's RSS and CPU time, and the
memory cgroup's usage, one :class:`~shmguard.measure.timeline.OwnerSnapshot` per call.

Owners come from :func:`shmguard.inspect.holders.scan_holders` (open descriptors and
mappings under /proc); RSS and CPU time from psutil; the cgroup's usage from its
``memory.current`` (v2) or ``memory.usage_in_bytes`` (v1) file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shmguard.measure.stall import TreeCpu
from shmguard.measure.timeline import OwnerSnapshot

#: PyTorch's shm block names: ``/torch_<pid>_<random>_<counter>`` (at::MapAllocator;
#: docs/background.md).
_TORCH_NAME = re.compile(r"/torch_(\d+)_\d+_\d+$")


def _proc_facts(pid: int) -> tuple[str, int, bytes] | None:
    """``(pid in its own namespace, parent pid, cmdline)`` of a process, or None when gone.
    The namespace pid is the last ``NSpid`` field of /proc/PID/status (proc(5)); it is what
    a ``torch_<pid>_...`` name carries when the job runs in a PID namespace."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as fh:
            status = fh.read()
        with open(f"/proc/{pid}/cmdline", "rb") as fb:
            cmdline = fb.read()
    except OSError:
        return None
    ns, ppid = str(pid), -1
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ns = line.split()[-1]
        elif line.startswith("PPid:"):
            ppid = int(line.split()[1])
    return ns, ppid, cmdline


def namespace_pids(pids: list[int]) -> set[str]:
    """The pids, as their own PID namespace numbers them (what a ``torch_<pid>_...`` name
    carries), of those of ``pids`` that are still running."""
    return {f[0] for pid in pids if (f := _proc_facts(pid)) is not None}


def torch_creator(name: str) -> str | None:
    """The creator's pid in a ``torch_<pid>_<random>_<counter>`` name, or None."""
    m = _TORCH_NAME.search("/" + name.rsplit("/", 1)[-1])
    return m.group(1) if m is not None else None


def _worker_siblings(
    pids: list[int],
    creators: set[str],
    earlier: dict[int, tuple[str, int, bytes]] | None = None,
) -> set[str]:
    """Namespace pids of the processes beside each ``torch_*`` creator: children of the same
    parent with the same command line. DataLoader workers are forks of the main process, so a
    worker whose blocks were all consumed between two scans is still counted (a run's owner
    scans saw 3 of a loader's 4 workers without this); a helper the main process spawned with
    another command line (multiprocessing's resource tracker) is not. ``earlier``: the
    processes as the previous scan and this one's start saw them (``pid -> (ns pid, ppid,
    cmdline)``), so a worker the main process stopped during this scan (a loader that fails
    within a scan interval of its first batch shuts its workers down at once) still counts:
    without them, a run --watch counted 3 of the seed loader's 4 workers, once in a CI run."""
    facts = {**(earlier or {})}
    facts.update((pid, f) for pid in pids if (f := _proc_facts(pid)) is not None)
    out: set[str] = set()
    for ns, ppid, cmd in facts.values():
        if ns in creators:
            out |= {n for n, p, c in facts.values() if p == ppid and c == cmd}
    return out


class OwnerTracker:
    """Takes owner snapshots of one process tree and remembers what persists between them.

    Args:
        pids: returns the PIDs of the tree (None: no process is scanned).
        scan: the holders scan (``scan(pids=...)`` returning a ``HoldersScan``), or None.
        usage_file: the memory cgroup's current-usage file, or None.
        errors: a dict used as an ordered set; distinct scan problems are added to it.
    """

    def __init__(
        self,
        pids: Callable[[], list[int]] | None,
        scan: Callable[..., Any] | None,
        usage_file: Path | None,
        errors: dict[str, None],
    ) -> None:
        self.pids = pids
        self.scan = scan
        self.usage_file = usage_file
        self.errors = errors
        self._procs: dict[int, Any] = {}
        self._cpu = TreeCpu()
        self._torch_largest = 0
        self._torch_creators: set[str] = set()
        #: the tree's processes at the previous scan's start (see :func:`_worker_siblings`).
        self._facts: dict[int, tuple[str, int, bytes]] = {}

    def torch_seen(self) -> tuple[frozenset[str], int]:
        """``(creators, largest)``: the pids (as in the names) of the processes that created
        ``torch_*`` blocks and the bytes of the largest block seen; (empty, 0) before any."""
        return frozenset(self._torch_creators), self._torch_largest

    def snapshot(self, t: float, shm_used: int) -> OwnerSnapshot:
        """One observation at ``t`` seconds since start, with ``shm_used`` statvfs bytes."""
        import psutil

        pids = self.pids() if self.pids is not None else []
        by_kind: Mapping[str, int] = {}
        held = 0
        if self.scan is not None and pids:
            facts = {pid: f for pid in pids if (f := _proc_facts(pid)) is not None}
            earlier, self._facts = {**self._facts, **facts}, facts
            result = self.scan(pids=pids)
            by_kind, held = dict(result.by_kind), result.total_bytes
            files = [f for holding in result.processes for f in holding.files]
            known = len(self._torch_creators)
            for f in (*files, *result.unheld):
                m = _TORCH_NAME.search(f.path) if f.kind == "torch" else None
                if m is not None:
                    self._torch_creators.add(m.group(1))
                    self._torch_largest = max(self._torch_largest, f.bytes)
            if len(self._torch_creators) > known:
                self._torch_creators |= _worker_siblings(pids, self._torch_creators, earlier)
            for line in result.errors[:3]:
                if "no such process" not in line:
                    self.errors.setdefault(line, None)
        rss = 0
        cpu_now: dict[int, float] = {}
        live: dict[int, Any] = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = psutil.Process(pid)
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    times = proc.cpu_times()
                cpu_now[pid] = times.user + times.system
                live[pid] = proc
            except psutil.Error:
                continue
        # An exited process keeps counting with the CPU time it had at its last snapshot.
        cpu = self._cpu.add(cpu_now)
        self._procs = live
        usage = None
        if self.usage_file is not None:
            try:
                usage = int(self.usage_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                usage = None
        return OwnerSnapshot(
            t=t,
            shm_used=shm_used,
            by_kind=by_kind,
            held_bytes=held,
            processes=len(pids),
            rss=rss,
            memory_usage=usage,
            cpu_seconds=cpu,
        )

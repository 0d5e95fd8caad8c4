"""The one stall verdict: is a job stuck because /dev/shm is full?

A DataLoader whose worker fails to allocate in its feeder thread drops the batch and the main
process waits forever (torch 2.13, ``in_order=True``, ``timeout=0``;
../shared/research/torch_shm.md section 2: 4 of 77 failing runs hung, and every run of a
loader with ``batch_size=None`` or a non-stacking collate). Nothing is printed by the main
process, so the verdict rests on three observations, each of which alone is not enough:

* **/dev/shm full**: no free page, or less than about one allocation (``margin``, at least 2%
  of the size) free now or at the peak, *with* evidence of a failed allocation. A failed
  allocation frees its partial pages, so a hung job can sit up to one batch below the limit,
  while a job that merely holds most of its /dev/shm and idles is not stuck;
* **a failed allocation**: a line of the failure catalogue (``unable to allocate shared
  memory(shm)``, a feeder-thread traceback, ``No space left on device``, a SIGBUS) in the
  output, or a new **zero-block** ``torch_*`` file: MapAllocator raises before it unlinks,
  leaving the name with ``st_size`` = the request and ``st_blocks`` = 0 (torch_shm.md 1.2);
* **no progress** for ``after`` seconds: used bytes unchanged, no output, and the process
  tree's CPU time flat.

Used by ``measure``/``probe`` and ``run --watch`` (:class:`shmguard.measure.hang.HangDetector`),
``shmguard watch``, the exporter and the PyTorch guard; each reads its sampler, keeps the
failed-block baseline and the CPU mark in the one stall observer
(:class:`shmguard.measure.stall.StallObserver`) and asks :func:`stall_verdict`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from shmguard.units import PAGE_SIZE, format_iec


@dataclass(frozen=True)
class ShmObservation:
    """What a watcher saw of /dev/shm and the job at one moment.

    Attributes:
        used: bytes used now (statvfs).
        total: the filesystem's size in bytes (0 when unknown: never full).
        peak: the highest used bytes seen so far.
        margin: bytes; free space below this counts as near full (give the largest single
            allocation seen, about one batch; at least 2% of ``total`` is used).
        alloc_failed: the output showed a failed shm allocation (the catalogue's shm
            failures).
        failed_blocks: zero-block ``torch_*`` files counted as failed allocations (a watcher
            that started with the job counts only new ones, one that attaches later all).
        quiet: seconds without progress (no output, no change in used bytes, CPU flat).
        sees_output: the watcher reads the job's output (``run``, ``measure``); False for one
            that cannot (``watch``, the exporter), whose evidence then says so instead of
            claiming there was none.
    """

    used: int
    total: int
    peak: int
    margin: int = 0
    alloc_failed: bool = False
    failed_blocks: int = 0
    quiet: float = 0.0
    sees_output: bool = True

    @property
    def near_full(self) -> bool:
        """Free space (now or at the peak) below ``max(margin, total / 50)``."""
        if self.total <= 0:
            return False
        margin = max(self.margin, self.total // 50)
        return self.total - self.used < margin or self.total - self.peak < margin

    @property
    def full(self) -> bool:
        """No free page now, or near full with a failed allocation seen."""
        if self.total <= 0:
            return False
        if self.total - self.used < PAGE_SIZE:
            return True
        return self.near_full and (self.alloc_failed or self.failed_blocks > 0)


@dataclass(frozen=True)
class StallVerdict:
    """The verdict on one :class:`ShmObservation`.

    Attributes:
        stalled: /dev/shm full and no progress for at least ``after`` seconds.
        full: /dev/shm counts as full (see :attr:`ShmObservation.full`).
        evidence: the observations behind the verdict, one short sentence each.
    """

    stalled: bool
    full: bool
    evidence: tuple[str, ...]

    @property
    def reason(self) -> str:
        """One sentence: the evidence joined, or that nothing points at a stall."""
        return "; ".join(self.evidence) if self.evidence else "no sign of a /dev/shm stall"


def stall_verdict(obs: ShmObservation, after: float) -> StallVerdict:
    """Whether ``obs`` shows a job stuck on a full /dev/shm for at least ``after`` seconds.

    Raises:
        ValueError: for a negative ``after``.
    """
    if after < 0:
        raise ValueError(f"negative stall time: {after}")
    evidence: list[str] = []
    if obs.total > 0 and (obs.full or obs.near_full):
        free = max(obs.total - obs.used, 0)
        evidence.append(
            f"/dev/shm {format_iec(obs.used)} of {format_iec(obs.total)} used "
            f"({format_iec(free)} free, peak {format_iec(obs.peak)})"
        )
    if obs.alloc_failed:
        evidence.append("the output shows a failed shared-memory allocation")
    if obs.failed_blocks:
        evidence.append(
            f"{obs.failed_blocks} zero-block torch_* file(s): failed DataLoader allocations"
        )
    full = obs.full
    stalled = full and obs.quiet >= after
    if stalled:
        seen = (
            "no output, no shm change, no CPU"
            if obs.sees_output
            else "no shm change, no CPU; the job's output is not visible here"
        )
        evidence.append(f"no progress for {obs.quiet:.0f} s ({seen})")
    return StallVerdict(stalled=stalled, full=full, evidence=tuple(evidence))


def failed_torch_blocks(shm_dir: str | Path) -> frozenset[str]:
    """Names of ``torch_*`` files in ``shm_dir`` that have a size but no blocks: what a failed
    PyTorch shm allocation leaves behind (torch_shm.md section 1.2). An unreadable directory
    gives an empty set."""
    return frozenset(name for name, _ in failed_torch_sizes(shm_dir))


def failed_torch_sizes(shm_dir: str | Path) -> tuple[tuple[str, int], ...]:
    """``(name, bytes asked for)`` of each failed allocation's file in ``shm_dir`` (see
    :func:`failed_torch_blocks`; ``st_size`` is the size the allocation asked for, one batch
    tensor), sorted by name; empty for an unreadable directory."""
    found: list[tuple[str, int]] = []
    try:
        entries = os.scandir(shm_dir)
    except OSError:
        return ()
    with entries:
        for entry in entries:
            if not entry.name.startswith("torch_"):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_blocks == 0 and st.st_size > 0:
                found.append((entry.name, st.st_size))
    return tuple(sorted(found))

"""The values ``tune`` works with: a configuration, a trial, the budget and the result.

Sizes are int bytes, rates per second, times seconds. Nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from shmguard.model.fix import Change

#: How a trial ended: ``ok`` (it ran and was timed), ``infeasible`` (it failed as it would in
#: production: shm exhausted, SIGBUS, hang, OOM kill, timeout), ``ruled-out`` (the DataLoader
#: model predicts more /dev/shm than the budget, so it was not run), ``failed`` (another
#: failure), ``interrupted`` (Ctrl-C during it).
Status = Literal["ok", "infeasible", "ruled-out", "failed", "interrupted"]


@dataclass(frozen=True, order=True)
class TrialConfig:
    """The DataLoader keyword arguments a trial passes to the factory.

    Attributes:
        num_workers: worker processes (0: batches are made in the main process).
        prefetch_factor: batches each worker prepares ahead; None with ``num_workers=0``
            (torch refuses one there).
        persistent_workers: workers outlive an epoch (always False with no workers).
        pin_memory: batches are copied to page-locked memory (tried only with a GPU).
    """

    num_workers: int
    prefetch_factor: int | None = 2
    persistent_workers: bool = False
    pin_memory: bool = False

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``FACTORY(**kwargs)``."""
        return {
            "num_workers": self.num_workers,
            "prefetch_factor": self.prefetch_factor,
            "persistent_workers": self.persistent_workers,
            "pin_memory": self.pin_memory,
        }

    def label(self) -> str:
        """Short text: ``nw=2 pf=2 persistent``."""
        text = f"nw={self.num_workers}"
        if self.num_workers:
            text += f" pf={self.prefetch_factor}"
        if self.persistent_workers:
            text += " persistent"
        if self.pin_memory:
            text += " pin"
        return text


def config(
    num_workers: int,
    prefetch_factor: int = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
) -> TrialConfig:
    """A :class:`TrialConfig` that torch accepts: no prefetch factor and no persistent workers
    without workers."""
    if num_workers == 0:
        return TrialConfig(0, None, False, pin_memory)
    return TrialConfig(num_workers, prefetch_factor, persistent_workers, pin_memory)


@dataclass(frozen=True)
class Trial:
    """One configuration tried (or ruled out) and what it gave.

    Attributes:
        config: the keyword arguments.
        status: see :data:`Status`.
        reason: one sentence: why it is infeasible, ruled out or failed ("" when ok).
        samples_per_s: samples delivered per second over the timed steps, or None.
        data_wait: fraction of the timed loop spent blocked in ``next()`` (0-1), or None.
        peak_shm: highest /dev/shm used above the start (statvfs, the one sampler), or None
            when not run.
        predicted_peak: the DataLoader model's peak for this configuration (one rank), or
            None before the batch size is known.
        memory_peak: the trial's memory cgroup peak (tmpfs pages included), or None.
        cpu_seconds: user+system CPU seconds of the trial's process tree (start-up and
            ``import torch`` included), or None.
        wall_time: seconds the trial took, sandbox set-up and teardown included (0 when not
            run).
        outcome: how measure classified the run (``ok``, ``shm-exhausted``, ``hang``...), or
            None when not run.
        epochs: epochs the trial's iteration started (more than 1: it crossed an epoch
            boundary, where ``persistent_workers`` matters).
        batch_pages: ``B'``, one batch's storages rounded to pages, from the trial's first
            batch (0 when unknown).
        repeats: samples/s of each run of the confirmation round, in order (empty when the
            configuration was not a finalist); then ``samples_per_s`` is their median.
        spread: ``(max - min) / median`` of ``repeats`` (0.1: the runs spanned 10% of their
            median), or None without repeats.
        single_samples_per_s: the search trial's own samples/s when the confirmation replaced
            ``samples_per_s`` with its median, else None.
    """

    config: TrialConfig
    status: Status
    reason: str = ""
    samples_per_s: float | None = None
    data_wait: float | None = None
    peak_shm: int | None = None
    predicted_peak: int | None = None
    memory_peak: int | None = None
    cpu_seconds: float | None = None
    wall_time: float = 0.0
    outcome: str | None = None
    epochs: int = 0
    batch_pages: int = 0
    repeats: tuple[float, ...] = ()
    spread: float | None = None
    single_samples_per_s: float | None = None

    @property
    def ok(self) -> bool:
        """True when the trial ran and was timed."""
        return self.status == "ok"


@dataclass(frozen=True)
class Budget:
    """What one node gives the job, and what each rank gets.

    Attributes:
        shm: bytes of /dev/shm for the whole node (all local ranks).
        memory: bytes of memory limit for the node, or None for none.
        cpus: CPUs for the node (quota and cpuset taken into account).
        local_ranks: processes on the node that each run the loader; the budgets are divided
            evenly among them.
        sources: one sentence per budget on where it came from.
        gpu: whether this machine has a GPU (``pin_memory`` is tried only then).
    """

    shm: int
    memory: int | None
    cpus: float
    local_ranks: int = 1
    sources: tuple[str, ...] = ()
    gpu: bool = False

    @property
    def rank_shm(self) -> int:
        """Bytes of /dev/shm for one rank (a trial's tmpfs)."""
        return self.shm // self.local_ranks

    @property
    def rank_memory(self) -> int | None:
        """Bytes of memory limit for one rank (a trial's memory cgroup), or None."""
        return None if self.memory is None else self.memory // self.local_ranks

    @property
    def rank_cpus(self) -> float:
        """CPUs for one rank (a trial's CPU quota)."""
        return self.cpus / self.local_ranks


@dataclass(frozen=True)
class Settings:
    """The container settings the recommended configuration needs (for the whole node).

    Attributes:
        shm_size: bytes of /dev/shm (the sizing policy's size of the measured and predicted
            peaks, capped at the budget).
        shm_basis: one sentence on how it was reached.
        memory_limit: bytes of memory limit, or None when it could not be measured.
        memory_basis: one sentence on how it was reached.
        cpus: CPUs (the budget the trials ran under).
        changes: the shm size and memory limit as fix values, for the snippet renderer.
    """

    shm_size: int
    shm_basis: str
    memory_limit: int | None
    memory_basis: str
    cpus: float
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class TuneResult:
    """What ``tune`` found.

    Attributes:
        loader: the factory, ``MODULE:FACTORY``.
        budget: the budget the trials ran under.
        steps: timed batches per trial.
        step_time: seconds of simulated training per batch.
        trials: every configuration tried or ruled out, in order.
        best: the trial with the highest throughput, or None when none ran.
        recommended: the cheapest trial within :data:`~shmguard.torch.tuning.search.TOLERANCE`
            of the best (fewest workers, then lowest prefetch factor, then lowest peak shm).
        settings: the container settings for ``recommended``, or None.
        interrupted: the search was stopped (Ctrl-C) and this is what it had found.
        notes: what was not tried and why, one sentence each.
        wall_time: seconds the whole search took.
    """

    loader: str
    budget: Budget
    steps: int
    step_time: float
    trials: tuple[Trial, ...]
    best: Trial | None
    recommended: Trial | None
    settings: Settings | None
    interrupted: bool = False
    notes: tuple[str, ...] = field(default=())
    wall_time: float = 0.0

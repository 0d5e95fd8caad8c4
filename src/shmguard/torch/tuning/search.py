"""The search: which configurations to try, in which order, and which one to pick.

1. ``num_workers=0`` first: it needs no /dev/shm, checks the factory, and sizes one batch
   (``B'``) for the DataLoader model;
2. a geometric sweep of ``num_workers`` (1, 2, 4, ...) up to the CPUs and the most workers
   whose predicted peak fits the shm budget (:func:`~shmguard.estimate.max_workers`), each
   with ``prefetch_factor=2``, or 1 when the model rules 2 out; configurations beyond the
   model's limit are listed as ruled out and never run. The sweep stops early when
   a configuration is infeasible (more workers need more shm), when the loop no longer waits
   for data (under :data:`WAIT_DONE` of its time), or when throughput stops improving by
   :data:`TOLERANCE` over the best worker configuration so far;
3. refinement: the untried worker counts halfway between the best and its swept neighbours;
4. ``prefetch_factor`` at the best worker count: 1 (less shm) always, 4 only when the loop
   still waits for data (more prefetch only absorbs jitter);
5. ``persistent_workers=True`` only when a trial crossed an epoch boundary (it changes
   nothing within an epoch): then at 1 worker already, and the sweep goes on with it when it
   is faster (worker start-up at every epoch can outweigh the worker count); otherwise at the
   best configuration; ``pin_memory=True`` only where a GPU exists;
6. the confirmation round (:mod:`~shmguard.torch.tuning.confirm`, run by the caller): the
   finalists re-measured in alternation;
7. the pick (:func:`pick`): the cheapest configuration within :data:`TOLERANCE` of the best
   throughput, or that cannot be told apart from it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import replace

from shmguard.estimate import LoaderSpec, max_workers
from shmguard.torch.tuning.confirm import cost, indistinct
from shmguard.torch.tuning.model import Budget, Trial, TrialConfig, config
from shmguard.torch.tuning.trial import ruled_out

#: A configuration within this fraction of the best throughput counts as as fast.
TOLERANCE = 0.02
#: Below this fraction of the loop spent waiting for data, more workers cannot help.
WAIT_DONE = 0.02
#: The most workers the sweep tries, whatever the CPUs.
MAX_WORKERS = 64

Run = Callable[[TrialConfig], Trial]


class Stop(Exception):
    """Raised by a runner to end the search early (an interrupted trial)."""


def pick(trials: tuple[Trial, ...] | list[Trial]) -> tuple[Trial | None, Trial | None]:
    """``(best, recommended)`` among the ``ok`` trials (only the re-measured ones once the
    confirmation round ran, by their medians): the best is the highest throughput; the
    recommended is the cheapest (:func:`~shmguard.torch.tuning.confirm.cost`: fewest workers,
    then lowest prefetch factor, then lowest peak /dev/shm, then without persistent workers
    or pinning) of those within :data:`TOLERANCE` of it or that cannot be told apart from it
    (:func:`~shmguard.torch.tuning.confirm.indistinct`). ``(None, None)`` when no trial ran."""
    ok = [t for t in trials if t.ok and t.samples_per_s is not None]
    ok = [t for t in ok if t.repeats] or ok
    if not ok:
        return None, None
    best = max(ok, key=lambda t: t.samples_per_s or 0.0)
    floor = (best.samples_per_s or 0.0) * (1 - TOLERANCE)
    close = [t for t in ok if (t.samples_per_s or 0.0) >= floor or indistinct(t, best)]
    return best, min(close, key=cost)


def sweep_points(cap: int) -> list[int]:
    """1, 2, 4, ... below ``cap``, and ``cap`` itself (empty for ``cap`` < 1)."""
    points = []
    n = 1
    while n < cap:
        points.append(n)
        n *= 2
    return [*points, cap] if cap >= 1 else []


class Search:
    """The search over one loader, trial by trial through ``run``.

    Args:
        run: runs one configuration (raises :class:`Stop` to end the search; an
            ``interrupted`` trial ends it too, after it is listed).
        budget: the budget (its per-rank figures bound the trials).
        cpu_workers: the most workers the CPUs allow.
    """

    def __init__(self, run: Run, budget: Budget, cpu_workers: int) -> None:
        self.run = run
        self.budget = budget
        self.cpu_workers = max(1, min(cpu_workers, MAX_WORKERS))
        self.trials: list[Trial] = []
        self.notes: list[str] = []
        self.batch_pages = 0
        #: A trial ends an epoch (the loader is shorter than warm-up + steps).
        self.crosses_epochs = False
        #: Persistent workers proved faster at 1 worker: the sweep goes on with them.
        self.persistent = False

    def _try(self, cfg: TrialConfig) -> Trial:
        done = next((t for t in self.trials if t.config == cfg), None)
        if done is not None:
            return done
        if self.batch_pages and cfg.num_workers:
            out = ruled_out(cfg, self.batch_pages, self.budget.rank_shm)
            if out is not None:
                self.trials.append(out)
                return out
        trial = self.run(cfg)
        self.trials.append(trial)
        if trial.status == "interrupted":
            raise Stop  # listed, so the report shows where the search stopped
        if trial.batch_pages and not self.batch_pages:
            self.batch_pages = trial.batch_pages
        return trial

    def best(self) -> Trial | None:
        """The fastest trial so far."""
        return pick(self.trials)[0]

    def best_workers(self) -> Trial | None:
        """The fastest trial with workers so far: refinement, prefetch_factor and
        persistent_workers start from it even when ``num_workers=0`` won its single trial
        (short trials are noisy, and the confirmation round decides between them: a
        ``num_workers=0`` measured at 857 samples/s once was 234 when re-measured)."""
        return pick([t for t in self.trials if t.config.num_workers])[0]

    def execute(self) -> None:
        """Run the whole search (see the module docstring); :class:`Stop` ends it early and
        keeps what was found."""
        with contextlib.suppress(Stop):
            self._search()

    def _shm_workers(self) -> int:
        if not self.batch_pages:
            return self.cpu_workers
        spec = LoaderSpec(self.batch_pages, 1, 1)
        return max_workers(self.budget.rank_shm, spec, limit=self.cpu_workers)

    def _sweep(self, nw: int) -> Trial:
        """``nw`` workers with prefetch_factor 2, or 1 when the model rules 2 out (with
        persistent workers once they proved faster)."""
        trial = self._try(config(nw, 2, self.persistent))
        if trial.status == "ruled-out":
            trial = self._try(config(nw, 1, self.persistent))
        if trial.ok and self.crosses_epochs and not self.persistent and nw == 1:
            # Epochs end within a trial: worker start-up recurs at every epoch unless the
            # workers persist, which can outweigh the worker count, so decide it first.
            other = self._try(replace(trial.config, persistent_workers=True))
            if other.ok and (other.samples_per_s or 0.0) >= (trial.samples_per_s or 0.0) * (
                1 + TOLERANCE
            ):
                self.persistent = True
                return other
        return trial

    def _search(self) -> None:
        base = self._try(config(0))
        if not base.ok:
            self.notes.append(f"num_workers=0 did not run ({base.reason}); nothing to compare")
            return
        self.crosses_epochs = base.epochs > 1
        fits = self._shm_workers()
        if fits < self.cpu_workers:
            self.notes.append(
                f"the DataLoader model allows at most {fits} worker(s) (with prefetch_factor=1) "
                "in the /dev/shm budget; more were ruled out without running"
            )
        points = sweep_points(min(fits, self.cpu_workers))
        if fits < self.cpu_workers:
            points.append(fits + 1)  # listed as ruled out: the model's edge
        for nw in points:
            prev = self.best()
            if prev is not None and (prev.data_wait or 0.0) < WAIT_DONE:
                self.notes.append(
                    f"more than {prev.config.num_workers} worker(s) not tried: the loop waited "
                    f"for data under {WAIT_DONE:.0%} of its time"
                )
                break
            workers = pick([t for t in self.trials if t.config.num_workers])[0]
            trial = self._sweep(nw)
            if not trial.ok:
                break
            # Compared with the best *worker* configuration: one worker is often slower than
            # loading in the main process (a batch crosses processes), two may not be.
            if workers is not None and (trial.samples_per_s or 0.0) < (
                workers.samples_per_s or 0.0
            ) * (1 + TOLERANCE):
                break
        self._refine()
        self._prefetch()
        self._extras()

    def _refine(self) -> None:
        best = self.best_workers()
        if best is None:
            return
        nw = best.config.num_workers
        swept = sorted({t.config.num_workers for t in self.trials if t.status != "ruled-out"})
        lower = max((n for n in swept if n < nw), default=None)
        upper = min((n for n in swept if n > nw), default=None)
        for other in (upper, lower):
            if other is None:
                continue
            mid = (nw + other) // 2 if other > nw else math.ceil((nw + other) / 2)
            if mid not in swept and mid > 0:
                self._sweep(mid)

    def _prefetch(self) -> None:
        best = self.best_workers()
        if best is None:
            return
        self._try(replace(best.config, prefetch_factor=1))
        if (best.data_wait or 0.0) >= WAIT_DONE:
            self._try(replace(best.config, prefetch_factor=4))
        else:
            self.notes.append(
                "prefetch_factor=4 not tried: the loop waited for data under "
                f"{WAIT_DONE:.0%} of its time, so more prefetching cannot speed it up"
            )

    def _extras(self) -> None:
        best, workers = self.best(), self.best_workers()
        if best is None:
            return
        if workers is not None and any(t.epochs > 1 for t in self.trials if t.ok):
            self._try(replace(workers.config, persistent_workers=True))
        elif workers is not None:
            self.notes.append(
                "persistent_workers not tried: no trial crossed an epoch boundary, and it "
                "changes nothing within an epoch (more --steps than batches per epoch would)"
            )
        if self.budget.gpu:
            self._try(replace(best.config, pin_memory=True))
        else:
            self.notes.append(
                "pin_memory not tried: no GPU here (it only speeds up host-to-GPU copies)"
            )

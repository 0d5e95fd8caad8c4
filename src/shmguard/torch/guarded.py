"""``guard``: iterate a DataLoader and turn running out of /dev/shm into one clear error.

Three ways a torch 2.13 DataLoader runs out of /dev/shm (../shared/research/torch_shm.md
sections 2 and 5), and what the guard makes of each:

* a worker's allocation fails in collate: PyTorch raises ``RuntimeError: Caught RuntimeError
  in DataLoader worker process N ... unable to allocate shared memory(shm) ... No space left on
  device (28)``;
* a worker touches a page tmpfs cannot back (torch before PR #161910, or a filesystem without
  ``posix_fallocate``): it dies of SIGBUS and PyTorch raises ``DataLoader worker (pid N) is
  killed by signal: Bus error``, then ``exited unexpectedly``;
* the allocation fails in a worker's queue feeder thread (``batch_size=None``, a collate that
  does not stack, labels): the batch is dropped and the main process **waits forever**.

PyTorch's exception text goes through the one failure classifier
(:func:`shmguard.triage.text.classify_text`, kept to the shm failures by
:func:`shmguard.measure.outcome.shm_failures`); a match becomes
:class:`~shmguard.torch.ShmExhaustedError` raised ``from`` PyTorch's exception.

**The hang.** A watcher thread (the one sampler, :class:`~shmguard.measure.sampler.ShmSampler`,
polling statvfs every ``watch_interval`` seconds, without raised priority or a changed switch
interval) keeps /dev/shm's use and peak. The main thread, blocked in the DataLoader's queue
``get``, has to be woken to act on it. Ways to do that, weighed:

* ``_thread.interrupt_main()`` only *schedules* the SIGINT handler (Python docs, "_thread":
  "does not emit the signal"), which runs when the blocked ``get`` returns on its own, every
  5 s (``MP_STATUS_CHECK_INTERVAL``), and arrives as a ``KeyboardInterrupt`` the program may
  handle as a user's Ctrl-C;
* a real signal sent to the main thread (``signal.pthread_kill``) wakes it at once, but only
  with a handler installed, which only the main thread may do (``signal.signal``), taking a
  signal number from the program;
* ``PyThreadState_SetAsyncExc`` lands at an arbitrary bytecode, also inside PyTorch's own
  bookkeeping;
* **the DataLoader's own timeout**, used here: the iterator's ``_get_data`` waits
  ``self._timeout`` seconds when it is > 0 and raises ``RuntimeError("DataLoader timed out
  after ... seconds")`` *before* changing any state (torch/utils/data/dataloader.py,
  ``_get_data`` and ``_next_data``, unchanged since torch 1.x), so calling ``next`` again goes
  on waiting for the same batch. The guard sets the iterator's ``_timeout`` to ``poll``
  seconds; each time a wait passes it, the main thread asks the one stall verdict
  (:func:`~shmguard.triage.stall.stall_verdict`: /dev/shm full, new zero-block ``torch_*``
  files, no batch and no change in use for ``stall_after`` seconds) and raises, or waits
  again. It works in any thread, with ``pin_memory`` too, costs nothing while batches come
  faster than ``poll``, and restores ``_timeout`` afterwards. A ``timeout`` the program set
  itself still applies, with PyTorch's own message.

Per-batch cost: two clock reads and a generator step (``benchmarks/guard_overhead.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

from shmguard.estimate import Policy, padded_bytes, predict
from shmguard.torch.errors import ShmExhaustedError, ShmState
from shmguard.torch.fixes import adapt_sentence, loader_spec, local_ranks_from_env, size_fix
from shmguard.torch.sizing import (
    DEFAULT_SIZED_BATCHES,
    BatchSizing,
    is_iterable_style,
    size_batches,
    stated_sizing,
)
from shmguard.torch.watch import (
    DEFAULT_STALL_AFTER,
    DEFAULT_WATCH_INTERVAL,
    Watch,
    chain_text,
    recommended_timeout,
)


class GuardedLoader:
    """What :func:`guard` returns: iterate it instead of the loader. Other attributes
    (``dataset``, ``batch_size``...) and ``len()`` are the loader's."""

    def __init__(
        self,
        loader: Any,
        *,
        stall_after: float,
        poll: float,
        batch_bytes: int | None,
        shm_path: str,
        watch_interval: float,
        batches: int,
        policy: Policy | None,
    ) -> None:
        if stall_after <= 0 or poll <= 0 or watch_interval <= 0:
            raise ValueError("stall_after, poll and watch_interval must be > 0 seconds")
        self.loader = loader
        self.stall_after = stall_after
        self.poll = poll
        self.batch_bytes = batch_bytes
        self.shm_path = shm_path
        self.watch_interval = watch_interval
        self.batches = batches
        self.policy = policy or Policy()
        self._sizing = stated_sizing(batch_bytes) if batch_bytes is not None else None

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        # Before __init__ (copy, pickle) there is no loader yet: AttributeError, as hasattr
        # and copy expect.
        if "loader" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["loader"], name)

    def __iter__(self) -> Iterator[Any]:
        return self._run()

    def _run(self) -> Iterator[Any]:
        if not getattr(self.loader, "num_workers", 0):  # no workers, no shm: nothing to guard
            yield from self.loader
            return
        margin = self._sizing.pages if self._sizing is not None else 0
        # Started before the workers, so the baseline is what others hold.
        watch = Watch(self.shm_path, self.watch_interval, self.stall_after, margin)
        try:
            it = iter(self.loader)
        except BaseException:
            watch.stop()
            raise
        if not hasattr(it, "_timeout"):  # not a torch DataLoader iterator: only errors
            watch.stop()
            yield from self._errors_only(it)
            return
        own_timeout = float(it._timeout)
        # A timeout of the program's own shorter than poll is kept as the poll.
        poll = min(self.poll, own_timeout) if own_timeout else self.poll
        it._timeout = poll
        poll_message = f"DataLoader timed out after {poll} seconds"
        monotonic = time.monotonic
        n = 0
        longest = 0.0
        try:
            while True:
                start = monotonic()
                while True:
                    try:
                        batch = next(it)
                        break
                    except StopIteration:
                        return
                    except RuntimeError as err:
                        waited = monotonic() - start
                        if str(err) != poll_message:
                            self._fail(it, watch, err, n, longest)
                            raise
                        self._waited(it, watch, err, n, longest, waited, own_timeout)
                wait = monotonic() - start
                if n and wait > longest:
                    longest = wait
                n += 1
                # Hand the batch over without keeping a reference in this frame: kept, it
                # would hold one more batch of /dev/shm than the loop itself does (a loop that
                # drops its batch would still peak at nw x pf + 2, torch_shm.md section 3).
                slot = [batch]
                del batch
                yield slot.pop()
        finally:
            it._timeout = own_timeout
            watch.stop()

    def _errors_only(self, it: Any) -> Iterator[Any]:
        """Iterate an iterator the guard cannot poll: shm failures are still turned into
        :class:`ShmExhaustedError`, hangs are not seen."""
        watch = Watch(self.shm_path, self.watch_interval, self.stall_after, 0)
        n = 0
        try:
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    return
                except RuntimeError as err:
                    self._fail(it, watch, err, n, 0.0)
                    raise
                n += 1
                slot = [batch]
                del batch
                yield slot.pop()
        finally:
            watch.stop()

    def _waited(
        self,
        it: Any,
        watch: Watch,
        err: RuntimeError,
        n: int,
        longest: float,
        waited: float,
        own_timeout: float,
    ) -> None:
        """A ``poll`` passed without a batch: raise for a stall or the program's own timeout,
        else return to wait again."""
        state = watch.state()
        verdict = watch.observe(waited, state)
        if verdict.stalled:
            # The verdict's own "no progress" sentence speaks of output and CPU, which a
            # watcher of a process sees; the guard sees batches.
            evidence = tuple(e for e in verdict.evidence if not e.startswith("no progress"))
            evidence += (f"no batch for {waited:.0f} s and no change in /dev/shm use",)
            raise self._exhausted(it, watch, "hang", state, evidence, n, longest) from None
        if own_timeout and waited >= own_timeout:
            timed_out = RuntimeError(f"DataLoader timed out after {own_timeout:g} seconds")
            if verdict.full:
                exc = self._exhausted(it, watch, "timeout", state, verdict.evidence, n, longest)
                raise exc from timed_out
            raise timed_out from None
        pin = getattr(it, "_pin_memory_thread", None)
        if getattr(it, "_pin_memory", False) and pin is not None and not pin.is_alive():
            raise RuntimeError("Pin memory thread exited unexpectedly") from err

    def _fail(self, it: Any, watch: Watch, err: BaseException, n: int, longest: float) -> None:
        """Raise :class:`ShmExhaustedError` from ``err`` when it is a shm failure; return
        otherwise (the caller re-raises ``err``)."""
        from shmguard.measure.outcome import is_sigbus, shm_failures
        from shmguard.triage.text import classify_text

        state = watch.state()
        results = classify_text(chain_text(err))
        failures = shm_failures(results)
        verdict = watch.observe(0.0, state)
        near = verdict.full or bool(verdict.evidence)
        kind = None
        if any(is_sigbus(r.id) for r in failures):
            kind = "bus-error"
        elif any(r.confidence != "low" for r in failures) or (failures and near):
            kind = "alloc-failed"
        elif near and any(r.kind in ("worker_exit", "worker_hang") for r in results):
            kind = "worker-died"
        if kind is None:
            return
        lines = tuple(dict.fromkeys(ev.text for r in failures or results for ev in r.evidence))
        raise self._exhausted(it, watch, kind, state, lines[:3], n, longest) from err

    def _exhausted(
        self,
        it: Any,
        watch: Watch,
        kind: str,
        state: ShmState,
        evidence: tuple[str, ...],
        n: int,
        longest: float,
    ) -> ShmExhaustedError:
        # Free the workers and their batches now: the exception's traceback would otherwise
        # keep the iterator, and its shm, alive for as long as the program keeps the error.
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        if getattr(self.loader, "_iterator", None) is it:
            self.loader._iterator = None
        sizing = self._size(state)
        also = ""
        if sizing is not None:
            spec = loader_spec(self.loader, sizing.pages, local_ranks_from_env())
            peak = predict(spec).peak
            what = "predicted peak" if not state.baseline else "predicted peak + use before"
            fix = size_fix(peak + state.baseline, what, self.policy, too_small=state.total)
            free = max(state.total - state.baseline, 0)
            also = adapt_sentence(spec, free, iterable=is_iterable_style(self.loader))
        else:
            fix = size_fix(None, "", self.policy, too_small=state.total)
        return ShmExhaustedError(
            kind, state, n, evidence, sizing, fix, recommended_timeout(longest), also
        )

    def _size(self, state: ShmState) -> BatchSizing | None:
        if self._sizing is not None:
            return self._sizing
        if not is_iterable_style(self.loader):
            try:
                # _exhausted has shut the workers down by now.
                made = size_batches(self.loader, self.batches)
                return dataclasses.replace(made, after_stop=True)
            except Exception:  # the failure report must not fail: fall back below
                pass
        asked = max((n for _, n in state.failed_files), default=0)
        if asked:
            pages = padded_bytes((asked,))
            return BatchSizing(pages, pages, 0, "failed-allocation")
        return None


def guard(
    loader: Any,
    *,
    stall_after: float = DEFAULT_STALL_AFTER,
    poll: float = 1.0,
    batch_bytes: int | None = None,
    shm_path: str = "/dev/shm",
    watch_interval: float = DEFAULT_WATCH_INTERVAL,
    batches: int = DEFAULT_SIZED_BATCHES,
    policy: Policy | None = None,
) -> GuardedLoader:
    """Wrap ``loader`` so that running out of /dev/shm raises
    :class:`~shmguard.torch.ShmExhaustedError` (module docstring: what is caught and how)::

        for batch in guard(loader):
            ...

    Args:
        loader: a ``torch.utils.data.DataLoader`` (with ``num_workers=0`` nothing is
            watched: no shm is used).
        stall_after: seconds without a batch, with /dev/shm full and a failed allocation
            seen, before a hang is raised.
        poll: seconds between the main thread's looks at the watcher while it waits for a
            batch (the DataLoader timeout the guard sets on its iterator).
        batch_bytes: bytes of one collated batch, for the fix; else the guard makes batches
            in the main process when it fails (:mod:`shmguard.torch.sizing`), or, for an
            IterableDataset, takes the size a failed allocation asked for.
        shm_path: the /dev/shm to watch.
        watch_interval: seconds between the watcher's statvfs polls.
        batches: batches to make and size for the fix; the largest counts.
        policy: the sizing policy for the fix.

    Raises:
        ValueError: a time <= 0 or ``batch_bytes`` <= 0.
        ShmExhaustedError: while iterating, as above.
    """
    return GuardedLoader(
        loader,
        stall_after=stall_after,
        poll=poll,
        batch_bytes=batch_bytes,
        shm_path=shm_path,
        watch_interval=watch_interval,
        batches=batches,
        policy=policy,
    )

"""``check_dataloader``: will this DataLoader fit in /dev/shm? Asked before any worker starts.

One batch is made and sized in a forked copy of the main process
(:mod:`shmguard.torch.sizing`), the DataLoader model predicts the node's peak
(:func:`~shmguard.estimate.predict`: ``(nw x pf + 2) x B' + semaphores`` per iterator, times
the local ranks), and the peak is compared with the free /dev/shm (statvfs ``f_bavail``).
What happens then is the caller's choice: raise
:class:`~shmguard.torch.ShmInsufficientError`, log a warning, or return a loader whose
``prefetch_factor``, then ``num_workers``, are lowered until it fits.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Literal

from shmguard.estimate import Policy, predict
from shmguard.torch.assessment import LoaderCheck
from shmguard.torch.errors import ShmInsufficientError
from shmguard.torch.fixes import (
    fitting,
    loader_spec,
    local_ranks_from_env,
    shm_space,
    size_fix,
)
from shmguard.torch.sizing import (
    DEFAULT_SIZED_BATCHES,
    BatchSizing,
    is_iterable_style,
    size_batches,
    stated_sizing,
)
from shmguard.units import PAGE_SIZE, format_iec

#: Where the guard logs (``logging.getLogger("shmguard.torch")``).
logger = logging.getLogger("shmguard.torch")

Action = Literal["raise", "warn", "adapt"]


def assess_dataloader(
    loader: Any,
    *,
    batch_bytes: int | None = None,
    shm_path: str = "/dev/shm",
    batches: int = DEFAULT_SIZED_BATCHES,
    policy: Policy | None = None,
    local_ranks: int | None = None,
) -> LoaderCheck:
    """Size ``loader``'s batches, predict its peak and compare it with the free /dev/shm,
    changing nothing.

    Args:
        loader: a ``torch.utils.data.DataLoader``; no iterator is made and no random state
            consumed (:mod:`shmguard.torch.sizing`).
        batch_bytes: bytes of one collated batch's tensors, when known (needed for an
            IterableDataset; for variable-size data, the largest batch).
        shm_path: the /dev/shm to compare with.
        batches: batches to make and size when ``batch_bytes`` is not given; the largest
            counts.
        policy: the sizing policy for the fix (default :class:`~shmguard.estimate.Policy`).
        local_ranks: processes on the node running this loader; default ``LOCAL_WORLD_SIZE``
            (torchrun), else 1.

    Raises:
        OSError: ``shm_path`` cannot be read.
        ValueError: ``batch_bytes`` <= 0 or ``batches`` < 1.
        Exception: whatever the dataset or the collate function raises while a batch is made.
    """
    space = shm_space(shm_path)
    if batch_bytes is not None:
        sizing = stated_sizing(batch_bytes)
    elif int(loader.num_workers) == 0:
        sizing = BatchSizing(0, 0, 0, "stated")  # no workers: nothing goes through shm
    elif is_iterable_style(loader):
        return LoaderCheck(
            space,
            None,
            None,
            None,
            reason="its dataset is an IterableDataset, which cannot be read ahead without "
            "consuming it; pass batch_bytes (the bytes of one collated batch's tensors)",
        )
    else:
        sizing = size_batches(loader, batches)
    ranks = local_ranks if local_ranks is not None else local_ranks_from_env()
    spec = loader_spec(loader, sizing.pages, ranks)
    pred = predict(spec)
    check = LoaderCheck(space, sizing, spec, pred, iterable=is_iterable_style(loader))
    if pred.peak <= space.free:
        return check
    in_use = space.used
    what = "predicted peak" if in_use < PAGE_SIZE else "predicted peak + what /dev/shm holds now"
    fix = size_fix(pred.peak + in_use, what, policy or Policy(), too_small=space.total)
    return replace(check, fix=fix)


def check_dataloader(
    loader: Any,
    *,
    action: Action = "raise",
    batch_bytes: int | None = None,
    shm_path: str = "/dev/shm",
    batches: int = DEFAULT_SIZED_BATCHES,
    policy: Policy | None = None,
    local_ranks: int | None = None,
) -> Any:
    """Check, before any worker starts, that ``loader`` fits in the free /dev/shm.

    Call it where the loader is built, before iterating it::

        loader = check_dataloader(DataLoader(ds, batch_size=32, num_workers=4))

    Args:
        action: what to do when the predicted peak does not fit: ``raise``
            :class:`~shmguard.torch.ShmInsufficientError`; ``warn`` through the
            ``shmguard.torch`` logger and go on; ``adapt``: return a new DataLoader (same
            dataset, sampler, collate function and every other setting) whose
            ``prefetch_factor``, then ``num_workers``, are lowered until it fits (down to
            ``num_workers=0``, which uses no shm), and log what changed. An
            IterableDataset's ``num_workers`` is kept (each worker iterates its own copy, so
            fewer workers give other batches): only ``prefetch_factor`` is lowered, and
            :class:`~shmguard.torch.ShmInsufficientError` is raised when that is not enough.
        batch_bytes, shm_path, batches, policy, local_ranks: as for :func:`assess_dataloader`.

    Returns:
        ``loader`` itself, or the adapted loader.

    When the fit cannot be told (an IterableDataset without ``batch_bytes``), a warning says
    so and ``loader`` is returned: an unknown is not a failure.

    Raises:
        ShmInsufficientError: ``action="raise"`` and the predicted peak does not fit, or
            ``action="adapt"`` cannot make an IterableDataset's loader fit.
        ValueError: an unknown ``action``; see also :func:`assess_dataloader`.
    """
    if action not in ("raise", "warn", "adapt"):
        raise ValueError(f"action must be 'raise', 'warn' or 'adapt', got {action!r}")
    check = assess_dataloader(
        loader,
        batch_bytes=batch_bytes,
        shm_path=shm_path,
        batches=batches,
        policy=policy,
        local_ranks=local_ranks,
    )
    if check.fits is None:
        logger.warning("%s", check.describe())
        return loader
    if check.fits:
        logger.debug("%s", check.describe())
        return loader
    if action == "raise":
        raise ShmInsufficientError(check)
    if action == "warn":
        logger.warning("%s", check.describe())
        return loader
    assert check.spec is not None and check.prediction is not None
    nw, pf = fitting(check.spec, check.space.free)
    if check.iterable and nw != check.spec.num_workers:
        raise ShmInsufficientError(check)  # its message says why adapt cannot
    new = rebuild_loader(loader, num_workers=nw, prefetch_factor=pf or None)
    after = predict(replace(check.spec, num_workers=nw, prefetch_factor=max(pf, 1))).peak
    changed = [f"prefetch_factor {check.spec.prefetch_factor} -> {pf}"] if pf else []
    if nw != check.spec.num_workers:
        changed.append(f"num_workers {check.spec.num_workers} -> {nw}")
    extra = (
        " Batches are now made in the main process (worker_init_fn is not called)."
        if nw == 0
        else ""
    )
    logger.warning(
        "shmguard adapted the DataLoader to /dev/shm: %s; predicted peak %s (was %s), "
        "%s free at %s. Give /dev/shm %s to keep the original settings.%s",
        ", ".join(changed) or "num_workers -> 0",
        format_iec(after),
        format_iec(check.prediction.peak),
        format_iec(check.space.free),
        check.space.path,
        format_iec(check.fix.size.bytes) if check.fix is not None else "more",
        extra,
    )
    return new


def rebuild_loader(loader: Any, *, num_workers: int, prefetch_factor: int | None) -> Any:
    """A new ``DataLoader`` with ``loader``'s dataset, sampler, batch sampler, collate
    function and every other constructor setting, except ``num_workers`` and
    ``prefetch_factor`` (``num_workers=0`` also drops the settings only workers take:
    ``prefetch_factor``, ``persistent_workers``, ``timeout``, ``multiprocessing_context``).

    A subclass of DataLoader is copied instead (its constructor may take other arguments),
    with the two attributes set on the copy, which DataLoader allows after construction.
    """
    import copy
    import inspect

    from torch.utils.data import BatchSampler, DataLoader

    workers = num_workers > 0
    if type(loader) is not DataLoader:
        new = copy.copy(loader)
        new.num_workers = num_workers
        new.prefetch_factor = prefetch_factor if workers else None
        new._iterator = None
        return new
    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout if workers else 0,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context if workers else None,
        "generator": loader.generator,
        "prefetch_factor": prefetch_factor if workers else None,
        "persistent_workers": loader.persistent_workers and workers,
        "pin_memory_device": loader.pin_memory_device,
    }
    if "in_order" in inspect.signature(DataLoader).parameters:
        kwargs["in_order"] = loader.in_order
    if is_iterable_style(loader):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is None:
        kwargs.update(batch_size=None, sampler=loader.sampler)
    elif type(loader.batch_sampler) is BatchSampler:
        bs = loader.batch_sampler
        kwargs.update(batch_size=bs.batch_size, sampler=bs.sampler, drop_last=bs.drop_last)
    else:
        kwargs.update(batch_sampler=loader.batch_sampler)
    return DataLoader(loader.dataset, **kwargs)

"""The shm model of a PyTorch DataLoader: how much /dev/shm its live iterators hold.

Measured with torch 2.13 CPU (../shared/research/torch_shm.md section 3, 72 configurations on
an 8 GiB tmpfs, a SCHED_FIFO statvfs sampler at 2 ms; docs/model.md has shmguard's own
calibration and its error). Per live iterator, with ``B'`` one collated batch's storages each
rounded up to a 4 KiB page:

* **steady** ``(nw x pf + 1) x B' + (3 x nw + 8) pages``: a consumer slower than the workers
  keeps ``nw x pf`` batches queued (``_try_put_index``, ``max_tasks = prefetch_factor *
  num_workers``) plus the one the loop holds; exact to 0.2% in 36/36 slow-consumer cells,
  and equal to the measured plateau in 24/24 slow runs of shmguard's calibration;
* **peak** ``(nw x pf + 2) x B' + sem``: inside ``next()`` the loop variable still holds the
  previous batch while the next one has arrived; never exceeded in 72/72 cells nor in the
  calibration's 32 runs. Whether the transient happens is a race (the worker allocating the
  next batch against the loop freeing the last), so a slow consumer's measured peak lies
  between the steady level and this bound. A loop that
  drops each batch (``del batch``) peaks at the steady level;
* a **fast** consumer (queues rarely full, production-limited) peaks anywhere between
  ``2 x B'`` (the batch the loop holds and the next one arriving: any run of two or
  more batches reaches it; ``1 x B'`` when the loop drops each batch) and the peak; any stall
  (evaluation, a checkpoint) fills the queues, so sizes use the peak. The research's
  0.75 x ``nw x pf x B`` low end did not hold: shmguard's calibration measured 0.625 x at
  nw 2, pf 4, 20 MiB (docs/model.md).

``pin_memory`` (by code reading of ``_utils/pin_memory.py``; not measurable on the CPU build):
the pin thread drains the worker queue eagerly, so shm stays at or below the unpinned figures
and up to ``nw x pf + 1`` pinned copies sit in ordinary memory. ``persistent_workers``: an
epoch cut short keeps ``nw x pf`` batches between epochs (section 4). ``num_workers=0``: no
shm. Not covered (the prediction says so in ``notes``): NCCL, custom multiprocessing, batches
the program keeps alive (views, lists of outputs, reference cycles).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from shmguard.units import PAGE_SIZE, round_up

#: PyTorch's default ``DataLoader(prefetch_factor=...)`` with workers (torch/utils/data/
#: dataloader.py).
DEFAULT_PREFETCH_FACTOR = 2
#: Bytes per element of the dtypes ``plan`` accepts (torch and numpy names).
DTYPE_BYTES = {
    "float64": 8,
    "double": 8,
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "int64": 8,
    "long": 8,
    "int32": 4,
    "int": 4,
    "int16": 2,
    "short": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}
#: The file_system strategy's refcount header per storage (torch_shm.md section 3).
FILE_SYSTEM_HEADER = 64

Consumer = Literal["slow", "fast", "unknown"]
Strategy = Literal["file_descriptor", "file_system"]


def padded_bytes(leaves: Iterable[int], strategy: Strategy = "file_descriptor") -> int:
    """``B'``: the bytes one collated batch takes in /dev/shm.

    Args:
        leaves: ``nbytes`` of every storage in the batch (image tensor, labels, each dict
            field that collate turns into a tensor); a 0-byte storage still takes one page.
        strategy: the sharing strategy; ``file_system`` adds a 64-byte header per storage.

    Raises:
        ValueError: for a negative size.
    """
    total = 0
    for n in leaves:
        if n < 0:
            raise ValueError(f"negative storage size: {n}")
        if strategy == "file_system":
            n += FILE_SYSTEM_HEADER
        total += max(PAGE_SIZE, round_up(n, PAGE_SIZE))
    return total


def batch_leaves(batch_size: int, sample_shape: Sequence[int], dtype: str) -> tuple[int, int]:
    """Storages of one default-collated batch of ``(sample, int label)`` pairs, in bytes:
    ``(batch_size x prod(sample_shape) x itemsize, batch_size x 8)`` (labels collate to one
    int64 tensor).

    Raises:
        ValueError: for a batch size or dimension < 1, or an unknown dtype (the message lists
            the known ones).
    """
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    if not sample_shape or any(d < 1 for d in sample_shape):
        raise ValueError(f"every dimension of the sample shape must be >= 1, got {sample_shape}")
    itemsize = DTYPE_BYTES.get(dtype.lower().removeprefix("torch.").removeprefix("np."))
    if itemsize is None:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return batch_size * math.prod(sample_shape) * itemsize, batch_size * 8


@dataclass(frozen=True)
class LoaderSpec:
    """What the model needs to know about one DataLoader.

    Attributes:
        batch_pages: ``B'`` in bytes (:func:`padded_bytes`); the largest batch for
            variable-size data.
        num_workers: worker processes (0: the main process loads; no shm).
        prefetch_factor: batches each worker prepares ahead (>= 1).
        pin_memory: batches are copied to page-locked RAM by the pin thread.
        persistent_workers: workers (and their queued batches) outlive an epoch.
        drops_batch: the loop releases each batch before the next (``del batch``); the
            transient extra batch then does not occur.
        consumer: ``slow`` (queues stay full), ``fast`` (production-limited) or ``unknown``.
        local_ranks: processes on the node that each run this loader (one per GPU under
            torchrun/DDP), all sharing /dev/shm.
        loaders: DataLoader iterators alive at once per rank (a validation loader beside the
            training one).

    Raises:
        ValueError: for a negative size or count, ``prefetch_factor`` < 1, or ranks/loaders < 1.
    """

    batch_pages: int
    num_workers: int
    prefetch_factor: int = DEFAULT_PREFETCH_FACTOR
    pin_memory: bool = False
    persistent_workers: bool = False
    drops_batch: bool = False
    consumer: Consumer = "unknown"
    local_ranks: int = 1
    loaders: int = 1

    def __post_init__(self) -> None:
        if self.batch_pages < 0 or self.num_workers < 0:
            raise ValueError("batch bytes and num_workers must be >= 0")
        if self.prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be >= 1, got {self.prefetch_factor}")
        if self.local_ranks < 1 or self.loaders < 1:
            raise ValueError("local ranks and loaders must be >= 1")


@dataclass(frozen=True)
class LoaderPrediction:
    """The model's answer for a :class:`LoaderSpec`, in bytes for the whole node.

    Attributes:
        steady: the level /dev/shm holds while the queues are full.
        peak: the highest level, transients included: what a size must cover.
        fast_low: the least any run of two or more batches reaches, ``2 x B'`` (``1 x B'``
            with ``drops_batch``; semaphores not counted): the other end of the range for a
            production-limited (fast) consumer, whose peak lies between this and ``peak``.
        per_iterator_steady: ``steady`` for one iterator of one rank.
        per_iterator_peak: ``peak`` for one iterator of one rank.
        semaphores: the fixed per-iterator overhead, ``(3 x nw + 8)`` pages.
        pinned_memory: ordinary (page-locked) memory the pin thread holds with
            ``pin_memory``, else 0.
        in_flight: batches counted in ``peak`` per iterator.
        notes: what the model assumed or cannot see, one sentence each.
    """

    steady: int
    peak: int
    fast_low: int
    per_iterator_steady: int
    per_iterator_peak: int
    semaphores: int
    pinned_memory: int
    in_flight: int
    notes: tuple[str, ...] = field(default=())


def predict(spec: LoaderSpec) -> LoaderPrediction:
    """Predict the node's /dev/shm use for ``spec`` (see the module docstring for the model
    and its sources)."""
    nw, pf, b = spec.num_workers, spec.prefetch_factor, spec.batch_pages
    copies = spec.local_ranks * spec.loaders
    notes: list[str] = []
    if nw == 0:
        notes.append("num_workers=0: batches are made in the main process and use no /dev/shm")
        return LoaderPrediction(0, 0, 0, 0, 0, 0, 0, 0, tuple(notes))
    sem = (3 * nw + 8) * PAGE_SIZE
    queued = nw * pf
    steady_one = (queued + 1) * b + sem
    extra = 1 if spec.drops_batch else 2
    peak_one = (queued + extra) * b + sem
    fast_low = (1 if spec.drops_batch else 2) * b * copies
    pinned = (queued + 1) * b * copies if spec.pin_memory else 0
    if spec.pin_memory:
        notes.append(
            "pin_memory: shm stays at or below this (the pin thread drains the queue) and up "
            "to nw x pf + 1 page-locked copies sit in ordinary memory (by code reading of "
            "torch/utils/data/_utils/pin_memory.py; not measured on a GPU)"
        )
    if spec.persistent_workers:
        notes.append(
            "persistent_workers: an epoch cut short keeps nw x pf batches in /dev/shm until "
            "the next epoch or until the DataLoader is deleted"
        )
    if spec.consumer == "fast":
        notes.append(
            "fast consumer: runs peak anywhere between 2 batches (the one held and the next) "
            "and the peak; any stall (evaluation, checkpointing) fills the queues, so size for "
            "the peak"
        )
    if copies > 1:
        notes.append(f"x{copies}: {spec.local_ranks} local rank(s) x {spec.loaders} loader(s)")
    notes.append(
        "not counted: batches the program keeps alive (views, lists of outputs, reference "
        "cycles), NCCL and other multiprocessing"
    )
    return LoaderPrediction(
        steady=steady_one * copies,
        peak=peak_one * copies,
        fast_low=fast_low,
        per_iterator_steady=steady_one,
        per_iterator_peak=peak_one,
        semaphores=sem,
        pinned_memory=pinned,
        in_flight=queued + extra,
        notes=tuple(notes),
    )


def max_workers(free: int, spec: LoaderSpec, *, limit: int = 256) -> int:
    """The most workers (0..``limit``) whose predicted peak fits in ``free`` bytes, with
    ``spec``'s other parameters; 0 when even one worker does not fit.

    Raises:
        ValueError: for negative ``free``.
    """
    if free < 0:
        raise ValueError(f"negative free space: {free}")
    best = 0
    for nw in range(1, limit + 1):
        if predict(replace(spec, num_workers=nw)).peak > free:
            break
        best = nw
    return best


def dataloader_bound(
    workers: int, batch_bytes: int, prefetch_factor: int = DEFAULT_PREFETCH_FACTOR
) -> int:
    """Upper bound of one DataLoader iterator's /dev/shm use, in bytes: :func:`predict`'s peak
    for a batch of ``batch_bytes`` plus one labels page.

    ``(workers x prefetch_factor + 2) x B' + (3 x workers + 8) pages``, where B' is the batch
    rounded up to whole pages plus one page for the labels tensor.

    Raises:
        ValueError: for a negative argument or ``prefetch_factor`` < 1.
    """
    if workers < 0 or batch_bytes < 0 or prefetch_factor < 1:
        raise ValueError("workers and batch bytes must be >= 0, prefetch_factor >= 1")
    spec = LoaderSpec(padded_bytes((batch_bytes, 0)), workers, prefetch_factor)
    return predict(spec).per_iterator_peak

"""How many bytes of /dev/shm one collated batch of a DataLoader takes (``B'``), measured
before any worker starts, without changing the loader, its dataset or any random state.

What reaches /dev/shm (torch 2.13, ../shared/research/torch_shm.md section 1.1): every tensor
*storage* in the batch a worker hands to the main process, each rounded up to a 4 KiB page
(:func:`~shmguard.estimate.padded_bytes`). numpy arrays that the collate function turns into
tensors count as tensors; numpy arrays, strings and Python numbers that reach the main process
as they are travel pickled through the worker's pipe and take no shm (measured here: a collate
returning a 24 MiB numpy array per batch left /dev/shm at 0.1 MiB, the default collate of the
same data at 120 MiB).

The batch is made as a worker would make it (``torch/utils/data/_utils/fetch.py``):
``dataset.__getitems__(indices)`` when the dataset has it, else ``[dataset[i] for i in
indices]``, then ``collate_fn``; without automatic batching (``batch_size=None``) one index and
``collate_fn(dataset[i])``. The indices come from a fresh iterator over the loader's own
``batch_sampler`` (or ``sampler``). All of it runs in a forked child of this process, as in a
forked worker, and only the sizes come back: whatever reading changes (a file, HDF5 or LMDB
handle the dataset opens on first use, which each worker must open for itself; caches; the
sampler's and every random state) stays in the child. Where there is no ``os.fork``, CUDA is
initialised here, or the child fails (then the dataset's own exception is raised here, with
its traceback), the batches are made in this process and only the random state is saved and
restored: Python's :mod:`random`, numpy's global state, torch's CPU generator (and the CUDA
ones when CUDA is initialised), the loader's ``generator`` and any ``torch.Generator`` held as
``generator`` by its sampler or batch sampler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import signal
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shmguard.estimate import padded_bytes
from shmguard.units import format_iec

#: Batches sized by default: the largest counts (variable-size data such as padded text or
#: detection targets differs from batch to batch).
DEFAULT_SIZED_BATCHES = 3
#: Containers nested deeper than this are not walked.
_MAX_DEPTH = 32


def shm_leaves(batch: Any) -> list[int]:
    """``nbytes`` of each distinct tensor storage in ``batch`` (a tensor, or mappings,
    sequences, dataclasses and plain objects holding tensors, to 32 levels): what a worker puts
    in /dev/shm for it. A storage shared by several views counts once, whole (a view pins its
    whole storage, torch_shm.md section 4). numpy arrays, strings, bytes and numbers count
    nothing (they are pickled through the pipe). Needs torch."""
    import torch

    seen: set[int] = set()
    ids: set[int] = set()
    out: list[int] = []

    def walk(obj: Any, depth: int) -> None:
        if depth > _MAX_DEPTH or obj is None or isinstance(obj, (str, bytes, int, float)):
            return
        if isinstance(obj, torch.Tensor):
            out.extend(_storage_bytes(obj, seen))
            return
        if id(obj) in ids:
            return
        ids.add(id(obj))
        if isinstance(obj, Mapping):
            for value in obj.values():
                walk(value, depth + 1)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for value in obj:
                walk(value, depth + 1)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name, None), depth + 1)
        elif type(obj).__module__ != "numpy" and hasattr(obj, "__dict__"):
            for value in vars(obj).values():
                walk(value, depth + 1)

    walk(batch, 0)
    return out


def _storage_bytes(t: Any, seen: set[int]) -> list[int]:
    """The bytes of ``t``'s storage, once per storage (by data pointer), or of its parts for
    a sparse or nested tensor."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, nested: count what it holds
        return [t.element_size() * t.numel()]
    key = storage.data_ptr()
    if key and key in seen:
        return []
    if key:
        seen.add(key)
    return [storage.nbytes()]


@dataclass(frozen=True)
class BatchSizing:
    """One batch's /dev/shm bytes, and where the figure comes from.

    Attributes:
        pages: ``B'`` in bytes: the largest sized batch's storages, each page-rounded (or the
            stated ``batch_bytes``, page-rounded).
        smallest: ``B'`` of the smallest sized batch (equal to ``pages`` for one batch).
        batches: how many batches were made in the main process (0 when none was).
        origin: ``batches`` (made and sized here), ``stated`` (the caller's ``batch_bytes``)
            or ``failed-allocation`` (the size a failed PyTorch allocation asked for: what
            the guard falls back to when it cannot make a batch).
        storages: storages in the largest batch (0 when none was made).
        after_stop: the batches were made after the loader's workers were stopped (the
            guard sizes them when it reports a failure), not before they started.
    """

    pages: int
    smallest: int
    batches: int
    origin: Literal["batches", "stated", "failed-allocation"] = "batches"
    storages: int = 0
    after_stop: bool = False

    @property
    def varies(self) -> bool:
        """The sized batches differed in size."""
        return self.smallest != self.pages

    @property
    def basis(self) -> str:
        """One phrase saying where ``pages`` comes from, for messages."""
        if self.origin == "stated":
            return "batch_bytes as given, rounded up to whole pages"
        if self.origin == "failed-allocation":
            return "the size a failed allocation asked for (no batch could be made here)"
        when = "after the workers were stopped" if self.after_stop else "before the workers start"
        if self.batches == 1:
            return f"one batch made {when}"
        spread = (
            f"sizes {format_iec(self.smallest)} to {format_iec(self.pages)}: variable-size data"
            if self.varies
            else "all the same size"
        )
        return f"the largest of {self.batches} batches made {when}, {spread}"


def stated_sizing(batch_bytes: int) -> BatchSizing:
    """A :class:`BatchSizing` for a size the caller states (one storage, page-rounded).

    Raises:
        ValueError: for ``batch_bytes`` <= 0.
    """
    if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes <= 0:
        raise ValueError(f"batch_bytes must be int bytes > 0, got {batch_bytes!r}")
    pages = padded_bytes((batch_bytes,))
    return BatchSizing(pages=pages, smallest=pages, batches=0, origin="stated")


def is_iterable_style(loader: Any) -> bool:
    """Whether ``loader``'s dataset is an ``IterableDataset`` (nothing to index). Needs torch."""
    from torch.utils.data import IterableDataset

    return isinstance(loader.dataset, IterableDataset)


def size_batches(loader: Any, batches: int = DEFAULT_SIZED_BATCHES) -> BatchSizing:
    """Make up to ``batches`` batches of a map-style ``loader`` in this process, as its
    workers would, and size them (module docstring: what is made, what is restored).

    Raises:
        ValueError: ``batches`` < 1, an iterable-style dataset, or a sampler that yields
            nothing.
        Exception: whatever the dataset or collate function raises.
    """
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    if is_iterable_style(loader):
        raise ValueError("an IterableDataset cannot be sized without reading it: give batch_bytes")
    sizes = _sizes_in_child(loader, batches)
    if sizes is None:
        with preserved_random_state(loader):
            sizes = _make_and_size(loader, batches)
    if not sizes:
        raise ValueError("the loader's sampler yields no batch: nothing to size")
    pages, storages = max(sizes)
    return BatchSizing(pages, min(s for s, _ in sizes), len(sizes), "batches", storages)


def _make_and_size(loader: Any, batches: int) -> list[tuple[int, int]]:
    """``(B', storages)`` of each of up to ``batches`` batches, made in this process."""
    auto = loader.batch_sampler is not None
    sampler = loader.batch_sampler if auto else loader.sampler
    sizes: list[tuple[int, int]] = []
    for index in list(itertools.islice(iter(sampler), batches)):
        batch = loader.collate_fn(_fetch(loader.dataset, index, auto))
        leaves = shm_leaves(batch)
        sizes.append((padded_bytes(leaves) if leaves else 0, len(leaves)))
        del batch
    return sizes


def _sizes_in_child(loader: Any, batches: int) -> list[tuple[int, int]] | None:
    """:func:`_make_and_size` in a forked child, as a forked worker would make the batches,
    so that nothing it changes reaches this process: a handle the dataset opens on first use
    (each worker must open its own: a shared file offset mixes up reads, an open file cannot
    be pickled for a ``spawn`` worker), caches, sampler and random state. None when it cannot
    (no ``os.fork``, CUDA initialised here) or the child failed: the caller then makes the
    batches here, so a dataset's own exception is raised with its own traceback."""
    import torch

    if not hasattr(os, "fork") or torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            torch.set_num_threads(1)  # as torch's _worker_loop does
            data = json.dumps(_make_and_size(loader, batches)).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as inp:
            data = inp.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:  # KeyboardInterrupt while the child works: end it too
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return [(int(pages), int(n)) for pages, n in json.loads(data)]


def _fetch(dataset: Any, index: Any, auto: bool) -> Any:
    # torch/utils/data/_utils/fetch.py, _MapDatasetFetcher.fetch (torch 2.13)
    if not auto:
        return dataset[index]
    getitems = getattr(dataset, "__getitems__", None)
    if getitems:
        return getitems(index)
    return [dataset[i] for i in index]


def _generators(loader: Any) -> list[Any]:
    import torch

    owners = [loader, loader.sampler, loader.batch_sampler]
    owners.append(getattr(loader.batch_sampler, "sampler", None))
    found: dict[int, Any] = {}
    for owner in owners:
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator):
            found[id(gen)] = gen
    return list(found.values())


@contextlib.contextmanager
def preserved_random_state(loader: Any = None) -> Iterator[None]:
    """Restore, on exit, the random states drawing batches may consume: Python's, numpy's
    global one (when numpy is imported), torch's CPU generator, the CUDA generators when CUDA
    is initialised, and the ``torch.Generator`` objects of ``loader`` and its samplers."""
    import torch

    py = random.getstate()
    np_mod = sys.modules.get("numpy")
    np_state = np_mod.random.get_state() if np_mod is not None else None
    cpu = torch.get_rng_state()
    initialized = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    cuda = torch.cuda.get_rng_state_all() if initialized else None
    gens = [(g, g.get_state()) for g in (_generators(loader) if loader is not None else [])]
    try:
        yield
    finally:
        random.setstate(py)
        if np_mod is not None and np_state is not None:
            np_mod.random.set_state(np_state)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        for gen, state in gens:
            gen.set_state(state)

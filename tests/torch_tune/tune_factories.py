"""Factories the tune tests tune (imported by the trials: this folder is on sys.path).

Small batches (1 MiB of float32, 8 samples) keep each trial to a few seconds on 2 CPUs.
"""

from __future__ import annotations

from typing import Any

from shmguard.examples import grid_loader

#: MiB per batch of :func:`small`.
BATCH_MIB = 1.0


def small(
    num_workers: int = 0,
    prefetch_factor: int | None = 2,
    persistent_workers: bool = False,
    pin_memory: bool = False,
) -> Any:
    """The grid loader with 1 MiB batches of 8 samples, 40 batches an epoch."""
    return grid_loader.loader(
        num_workers,
        prefetch_factor,
        persistent_workers,
        pin_memory,
        batch_mib=BATCH_MIB,
        batch_size=8,
        batches=40,
    )


def raises(**kwargs: Any) -> Any:
    """A factory whose code is broken."""
    raise RuntimeError("dataset path /data/train does not exist")


def not_a_loader(**kwargs: Any) -> Any:
    """A factory that returns the dataset instead of the loader."""
    return [1, 2, 3]


def fixed_workers(**kwargs: Any) -> Any:
    """A factory that ignores the num_workers it is given."""
    kwargs["num_workers"] = 4
    return small(**kwargs)


def _dataset(n: int = 40, fail_after: int | None = None, chatty: bool = False) -> Any:
    """A map-style dataset of ``n`` 4 KiB float32 samples; raises at item ``fail_after``;
    ``chatty`` prints half a line per item (no newline) and a long line."""
    import torch

    class Data(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> Any:
            if fail_after is not None and i >= fail_after:
                raise KeyError(f"sample {i} is missing from the index")
            if chatty:
                print(f"loading {i} " + "x" * 2000, flush=True)
                print("partial line, no newline", end="", flush=True)
            return torch.full((1024,), float(i)), i

    return Data()


def ignores_prefetch(num_workers: int = 0, **kwargs: Any) -> Any:
    """A factory that passes num_workers but drops the other keywords."""
    from torch.utils.data import DataLoader

    return DataLoader(_dataset(), batch_size=4, num_workers=num_workers)


def _kw(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in ("num_workers", "prefetch_factor", "persistent_workers")}


def unbatched(**kwargs: Any) -> Any:
    """A loader without automatic batching (``batch_size=None``): each item is one sample."""
    from torch.utils.data import DataLoader

    return DataLoader(_dataset(), batch_size=None, **_kw(kwargs))


def raises_after(**kwargs: Any) -> Any:
    """A loader whose dataset raises KeyError from its 8th item on."""
    from torch.utils.data import DataLoader

    return DataLoader(_dataset(fail_after=8), batch_size=4, **_kw(kwargs))


def chatty(**kwargs: Any) -> Any:
    """A loader whose dataset prints long lines and half lines for every item."""
    from torch.utils.data import DataLoader

    return DataLoader(_dataset(chatty=True), batch_size=4, **_kw(kwargs))


def iterable(**kwargs: Any) -> Any:
    """A loader over an IterableDataset (each worker yields its share)."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class Stream(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            info = get_worker_info()
            start, step = (info.id, info.num_workers) if info else (0, 1)
            for i in range(start, 40, step):
                yield torch.full((1024,), float(i)), i

    return DataLoader(Stream(), batch_size=4, **_kw(kwargs))


#: A factory that is a module attribute bound to a lambda.
lambda_factory = lambda **kwargs: small(**kwargs)  # noqa: E731


def aborts(**kwargs: Any) -> Any:
    """A factory that kills its own process (SIGABRT), as a crashing native library would."""
    import os

    os.abort()

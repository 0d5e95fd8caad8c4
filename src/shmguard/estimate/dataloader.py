"""The shm model of a PyTorch DataLoader: how much /dev/shm one live iterator can hold.

Source: docs/background.md, "How much is needed" (measured with torch 2.13 CPU over 72
configurations without an exception).
"""

from __future__ import annotations

from shmguard.units import PAGE_SIZE, round_up

#: PyTorch's default ``DataLoader(prefetch_factor=...)`` with workers (torch/utils/data/
#: dataloader.py).
DEFAULT_PREFETCH_FACTOR = 2


def dataloader_bound(
    workers: int, batch_bytes: int, prefetch_factor: int = DEFAULT_PREFETCH_FACTOR
) -> int:
    """Upper bound of one DataLoader iterator's /dev/shm use, in bytes.

    ``(workers x prefetch_factor + 2) x B' + (3 x workers + 8) pages``, where B' is the batch
    rounded up to whole pages plus one page for the labels tensor.

    Raises:
        ValueError: for a negative argument or ``prefetch_factor`` < 1.
    """
    if workers < 0 or batch_bytes < 0 or prefetch_factor < 1:
        raise ValueError("workers and batch bytes must be >= 0, prefetch_factor >= 1")
    if workers == 0:
        return 0
    pages = round_up(batch_bytes, PAGE_SIZE) // PAGE_SIZE + 1
    return (workers * prefetch_factor + 2) * pages * PAGE_SIZE + (3 * workers + 8) * PAGE_SIZE

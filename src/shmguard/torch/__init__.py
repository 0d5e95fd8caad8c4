"""The PyTorch guard: stop a DataLoader before /dev/shm runs out, and say so when it does.

* :func:`check_dataloader` (before any worker starts): make a batch in the main process, predict
  the loader's peak with the DataLoader model and raise :class:`ShmInsufficientError`, warn, or
  adapt the loader when it does not fit the free /dev/shm;
* :func:`guard` (while iterating): turn a worker's failed shm allocation, its SIGBUS, or a hang
  on a full /dev/shm into :class:`ShmExhaustedError` with the figures and the fix.

Needs the ``torch`` extra (``pip install 'shmguard[torch]'``); torch is imported only when a
function runs, never by ``import shmguard`` or ``import shmguard.torch``. docs/guard.md has the
how-to and messages from real runs.
"""

from __future__ import annotations

from shmguard.torch.check import LoaderCheck, assess_dataloader, check_dataloader, rebuild_loader
from shmguard.torch.errors import ShmExhaustedError, ShmGuardError, ShmInsufficientError, ShmState
from shmguard.torch.guarded import GuardedLoader, guard
from shmguard.torch.sizing import BatchSizing, shm_leaves, size_batches

__all__ = [
    "BatchSizing",
    "GuardedLoader",
    "LoaderCheck",
    "ShmExhaustedError",
    "ShmGuardError",
    "ShmInsufficientError",
    "ShmState",
    "assess_dataloader",
    "check_dataloader",
    "guard",
    "rebuild_loader",
    "shm_leaves",
    "size_batches",
]

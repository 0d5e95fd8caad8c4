"""The PyTorch guard: stop a DataLoader before /dev/shm runs out, and say so when it does.

* :func:`check_dataloader` (before any worker starts): make a batch in the main process, predict
  the loader's peak with the DataLoader model and raise :class:`ShmInsufficientError`, warn, or
  adapt the loader when it does not fit the free /dev/shm;
* :func:`guard` (while iterating): turn a worker's failed shm allocation, its SIGBUS, or a hang
  on a full /dev/shm into :class:`ShmExhaustedError` with the figures and the fix.

Needs the ``torch`` extra (``pip install 'shmguard[torch]'``); torch is imported only when a
function runs, never by ``import shmguard`` or ``import shmguard.torch``. docs/guard.md has the
how-to and messages from real runs.

* :func:`tune` (before a run, once): the fastest configuration that fits the container's CPU,
  memory and /dev/shm budget, found by running trials in sandboxes of that budget
  (:mod:`shmguard.torch.tuning`, docs/tune.md); imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shmguard.torch.assessment import LoaderCheck
from shmguard.torch.check import assess_dataloader, check_dataloader, rebuild_loader
from shmguard.torch.errors import ShmExhaustedError, ShmGuardError, ShmInsufficientError, ShmState
from shmguard.torch.guarded import GuardedLoader, guard
from shmguard.torch.sizing import BatchSizing, shm_leaves, size_batches

if TYPE_CHECKING:
    from shmguard.torch.tuning import TuneResult, tune

__all__ = [
    "BatchSizing",
    "GuardedLoader",
    "LoaderCheck",
    "ShmExhaustedError",
    "ShmGuardError",
    "ShmInsufficientError",
    "ShmState",
    "TuneResult",
    "assess_dataloader",
    "check_dataloader",
    "guard",
    "rebuild_loader",
    "shm_leaves",
    "size_batches",
    "tune",
]


def __getattr__(name: str) -> Any:
    """``tune`` and ``TuneResult`` on first use: the tuner pulls in the sandbox and the host
    inspection, which the guard does not need (PEP 562)."""
    if name in ("tune", "TuneResult"):
        from shmguard.torch import tuning

        return getattr(tuning, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

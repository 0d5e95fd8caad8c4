"""The exceptions of the PyTorch guard. Both are ``RuntimeError`` subclasses, so code that
catches the DataLoader's own ``RuntimeError`` still catches them; their text says what happened,
with the figures, and what to change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shmguard.units import format_iec

if TYPE_CHECKING:
    from shmguard.torch.assessment import LoaderCheck
    from shmguard.torch.fixes import SizeFix
    from shmguard.torch.sizing import BatchSizing


class ShmGuardError(RuntimeError):
    """Base class of the guard's errors."""


class ShmInsufficientError(ShmGuardError):
    """Raised by :func:`~shmguard.torch.check_dataloader` before any worker starts: the
    loader's predicted peak does not fit in the free /dev/shm.

    Attributes:
        check: the whole assessment (:class:`~shmguard.torch.LoaderCheck`): free and total
            bytes, the batch size and its basis, the prediction, the fix.
        need: the predicted peak in bytes (``check.prediction.peak``).
        free: free /dev/shm bytes.
    """

    def __init__(self, check: LoaderCheck) -> None:
        self.check = check
        pred = check.prediction
        self.need = pred.peak if pred is not None else 0
        self.free = check.space.free
        super().__init__(check.describe())

    def __reduce__(self) -> tuple[type[ShmInsufficientError], tuple[LoaderCheck]]:
        # Rebuilt from its value, so it survives pickling (a spawned rank's error sent home).
        return (type(self), (self.check,))


@dataclass(frozen=True)
class ShmState:
    """/dev/shm when the guard stopped the loop.

    Attributes:
        path: the /dev/shm watched.
        used: bytes in use at that moment.
        total: the filesystem's size.
        peak: the highest use the guard's sampler saw during the loop, or, when higher, the
            use a failed allocation proves (``total`` less the smallest request's pages).
        baseline: use when the loop started (other programs, earlier loaders).
        failed_files: ``(name, requested bytes)`` of the zero-block ``torch_*`` files that
            appeared during the loop: each is a PyTorch allocation that failed
            (torch_shm.md 1.2).
    """

    path: str
    used: int
    total: int
    peak: int
    baseline: int
    failed_files: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        """One sentence with the figures."""
        text = (
            f"/dev/shm at {self.path}: {format_iec(self.used)} of {format_iec(self.total)} "
            f"used, peak {format_iec(self.peak)}"
        )
        if self.baseline:
            text += f" ({format_iec(self.baseline)} in use before the loop)"
        if self.failed_files:
            sizes = sorted({n for _, n in self.failed_files}, reverse=True)
            asked = ", ".join(format_iec(n) for n in sizes[:3])
            text += (
                f"; {len(self.failed_files)} failed allocation(s) left zero-block torch_* "
                f"files (asking for {asked})"
            )
        return text + "."


#: ``ShmExhaustedError.kind`` values and what each means, for the message.
KINDS = {
    "alloc-failed": "a worker could not allocate shared memory",
    "bus-error": "a worker was killed by SIGBUS touching a /dev/shm page tmpfs could not back",
    "hang": "no batch arrived while /dev/shm was full",
    "timeout": "the DataLoader timed out while /dev/shm was full",
    "worker-died": "a worker died while /dev/shm was full",
}


class ShmExhaustedError(ShmGuardError):
    """Raised by :func:`~shmguard.torch.guard` when a guarded loop ran out of /dev/shm:
    a worker's failed allocation, its death by SIGBUS, or a hang on a full /dev/shm. Chained
    (``__cause__``) to PyTorch's exception when there is one; a hang has none.

    Attributes:
        kind: ``alloc-failed``, ``bus-error``, ``hang``, ``timeout`` or ``worker-died``.
        state: :class:`ShmState` at that moment.
        batches: batches the loop received before.
        evidence: the lines behind the verdict (PyTorch's error line, the stall evidence).
        sizing: the batch size used for the fix, or None when unknown.
        fix: the size fix (:class:`~shmguard.torch.fixes.SizeFix`): ``fix.size.bytes`` is the
            size to give /dev/shm.
        timeout: seconds to pass as ``DataLoader(timeout=...)`` so a stuck loader raises.
    """

    def __init__(
        self,
        kind: str,
        state: ShmState,
        batches: int,
        evidence: tuple[str, ...],
        sizing: BatchSizing | None,
        fix: SizeFix,
        timeout: int,
        also: str = "",
    ) -> None:
        self.kind = kind
        self.state = state
        self.batches = batches
        self.evidence = evidence
        self.sizing = sizing
        self.fix = fix
        self.timeout = timeout
        self._args = (kind, state, batches, evidence, sizing, fix, timeout, also)
        lines = [f"DataLoader ran out of /dev/shm after {batches} batch(es): {KINDS[kind]}."]
        lines += [f"  {e}" for e in evidence]
        lines.append(state.describe())
        if sizing is not None:
            lines.append(f"One batch takes {format_iec(sizing.pages)} ({sizing.basis}).")
        lines.append(f"Fix: {fix.text}")
        if also:
            lines.append(also)
        lines.append(
            f"Set DataLoader(timeout={timeout}) so a loader stuck on a full /dev/shm raises "
            "instead of hanging."
        )
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[type[ShmExhaustedError], tuple[object, ...]]:
        return (type(self), self._args)

"""``LoaderCheck``: what :func:`~shmguard.torch.assess_dataloader` found, and the words the
guard's exception and warning print for it. A module of its own so that
:mod:`shmguard.torch.errors` (whose :class:`~shmguard.torch.ShmInsufficientError` carries a
check) and :mod:`shmguard.torch.check` (which raises it) both import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.estimate import LoaderPrediction, LoaderSpec
from shmguard.torch.fixes import ShmSpace, SizeFix, adapt_sentence
from shmguard.torch.sizing import BatchSizing
from shmguard.units import format_iec


@dataclass(frozen=True)
class LoaderCheck:
    """What :func:`assess_dataloader` found.

    Attributes:
        space: the /dev/shm's figures before the loader starts.
        sizing: one batch's bytes and their basis; None when they cannot be told (an
            IterableDataset without ``batch_bytes``).
        spec: the model's input; None with ``sizing``.
        prediction: the model's answer (``peak`` is what must fit); None with ``sizing``.
        fix: the size fix when it does not fit, else None.
        reason: why nothing could be predicted, or "".
        iterable: the dataset is an IterableDataset (``adapt`` keeps its ``num_workers``).
    """

    space: ShmSpace
    sizing: BatchSizing | None
    spec: LoaderSpec | None
    prediction: LoaderPrediction | None
    fix: SizeFix | None = None
    reason: str = ""
    iterable: bool = False

    @property
    def fits(self) -> bool | None:
        """The predicted peak fits in the free bytes; None when it cannot be told."""
        if self.prediction is None:
            return None
        return self.prediction.peak <= self.space.free

    def describe(self) -> str:
        """The figures, the cause and the fix, as the exception and the warning print them."""
        if self.prediction is None or self.spec is None or self.sizing is None:
            return f"shmguard cannot tell whether this DataLoader fits in /dev/shm: {self.reason}"
        spec, pred, space = self.spec, self.prediction, self.space
        verdict = "fits in" if self.fits else "does not fit in"
        lines = [
            f"DataLoader {verdict} /dev/shm: it needs up to {format_iec(pred.peak)} (predicted "
            f"peak), {format_iec(space.free)} of {format_iec(space.total)} is free at "
            f"{space.path}.",
        ]
        if spec.num_workers:
            ranks = f", times {spec.local_ranks} local ranks" if spec.local_ranks > 1 else ""
            lines.append(
                f"Cause: num_workers={spec.num_workers} x prefetch_factor={spec.prefetch_factor} "
                f"= {spec.num_workers * spec.prefetch_factor} batches queued plus up to 2 in "
                f"the training loop's hands, {format_iec(spec.batch_pages)} each "
                f"({self.sizing.basis}), plus {format_iec(pred.semaphores)} of semaphores"
                f"{ranks}."
            )
        if self.fix is not None:
            lines.append(f"Fix: {self.fix.text}")
            lines.append(adapt_sentence(spec, space.free, iterable=self.iterable))
        return "\n".join(lines)

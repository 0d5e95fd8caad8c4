"""The DataLoader model applied to what a measuring run saw: where ``probe`` starts its search.

A measuring run's owner scans see two things of a DataLoader (:class:`~shmguard.measure.
sampler.Timeline`): how many processes created ``torch_*`` blocks (its workers: the pid in the
name is the allocating process) and the largest block (one collated batch tensor). The
``prefetch_factor`` cannot be seen from outside; the model's levels are whole batches (the
steady level of a slow consumer is ``nw x pf + 1`` batches, its transient peak one more, and a
fast consumer stays between 0.75 x ``nw x pf`` batches and that peak: torch_shm.md sections 3
and 4), so a measured peak above the default's levels picks a larger one
(:func:`observed_loader`). Several loaders or ranks look like one loader with all their
workers; their levels add up to the same within a batch or two, which the search then finds.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.estimate.dataloader import (
    DEFAULT_PREFETCH_FACTOR,
    LoaderPrediction,
    LoaderSpec,
    padded_bytes,
    predict,
)
from shmguard.estimate.decide import Need
from shmguard.units import format_iec

#: Largest prefetch_factor tried when matching a measured peak.
MAX_PREFETCH = 64
#: Relative slack when deciding that a measured peak lies in a prefetch_factor's range (the
#: sampler can miss the last page or two of a level, and semaphores vary by a few pages).
SLACK = 0.02


@dataclass(frozen=True)
class ObservedLoader:
    """The loader a measuring run saw, as the model describes it.

    Attributes:
        workers: processes that created ``torch_*`` blocks.
        batch_bytes: bytes of the largest ``torch_*`` block (one collated batch tensor).
        prefetch_factor: the one whose levels match the measured peak (see the module
            docstring); not seen directly.
        spec: the model's input (``B'`` = the batch rounded up to pages plus one labels page).
        prediction: the model's steady level and peak for it.
        basis: one sentence: what was seen and predicted, for reports.
    """

    workers: int
    batch_bytes: int
    prefetch_factor: int
    spec: LoaderSpec
    prediction: LoaderPrediction
    basis: str

    def need(self) -> Need:
        """The model's peak as evidence for the size decision
        (:class:`~shmguard.estimate.decide.ShmEvidence` ``model``), with :attr:`basis` as its
        context."""
        return Need(self.prediction.peak, "its predicted peak", self.basis)


def observed_loader(workers: int, batch_bytes: int, peak: int) -> ObservedLoader | None:
    """The model's view of a loader with ``workers`` workers and ``batch_bytes`` batches whose
    measured /dev/shm peak was ``peak`` bytes; None when no worker or batch was seen (then
    there is no DataLoader to model).

    The prefetch_factor is PyTorch's default 2 unless the peak is above that one's transient
    peak (with :data:`SLACK`); then the smallest larger one whose steady..peak range holds the
    peak, else the smallest whose transient peak reaches it (a fast consumer peaks below its
    steady level), at most :data:`MAX_PREFETCH`. A peak below the default's levels does not
    make it 1: one run whose queues did not fill (a short run, a fast consumer; the seed's
    loader peaked anywhere from 6 to 9 batches in 10-batch runs) looks the same, and the search
    goes lower by itself when the steady level is more than the job needs.

    Raises:
        ValueError: for a negative argument.
    """
    if workers < 0 or batch_bytes < 0 or peak < 0:
        raise ValueError("workers, batch bytes and peak must be >= 0")
    if workers == 0 or batch_bytes == 0:
        return None
    b = padded_bytes((batch_bytes, 0))

    def at(pf: int) -> LoaderPrediction:
        return predict(LoaderSpec(b, workers, pf))

    def holds(pf: int) -> bool:
        p = at(pf)
        return p.steady * (1 - SLACK) <= peak <= p.peak * (1 + SLACK)

    pf = DEFAULT_PREFETCH_FACTOR
    if peak > at(pf).peak * (1 + SLACK):
        larger = range(pf + 1, MAX_PREFETCH + 1)
        pf = next((f for f in larger if holds(f)), 0) or next(
            (f for f in larger if at(f).peak * (1 + SLACK) >= peak), MAX_PREFETCH
        )
    spec = LoaderSpec(b, workers, pf)
    pred = predict(spec)
    why = f"the one whose levels match its {format_iec(peak)} peak"
    if peak < pred.steady * (1 - SLACK):
        why = f"PyTorch's default; its {format_iec(peak)} peak does not reach those levels"
    basis = (
        f"the DataLoader model for the {workers} worker(s) and {format_iec(batch_bytes)} "
        f"batches the measuring run saw, with prefetch_factor {pf} ({why}): steady "
        f"{format_iec(pred.steady)}, peak {format_iec(pred.peak)}"
    )
    return ObservedLoader(workers, batch_bytes, pf, spec, pred, basis)

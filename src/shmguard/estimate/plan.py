"""``shmguard plan``'s logic: a DataLoader's parameters -> predicted shm, sizes to ship, fix.

The prediction is the one DataLoader model's (:func:`shmguard.estimate.dataloader.predict`,
calibrated in docs/model.md); the sizes are the one size decision's
(:func:`~shmguard.estimate.decide.choose_shm` with the predicted peak as the model's evidence,
:func:`~shmguard.estimate.policy.memory_limit_for` of the model's peak memory); the fix is a
pair of :class:`~shmguard.model.fix.Change` values that the snippet renderer writes for each
runtime. Nothing here reads the host: :func:`check_fit` and :func:`workers_that_fit` take the
free bytes of /dev/shm from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shmguard.estimate.dataloader import (
    DEFAULT_PREFETCH_FACTOR,
    LoaderPrediction,
    LoaderSpec,
    batch_leaves,
    max_workers,
    padded_bytes,
    predict,
)
from shmguard.estimate.decide import Need, ShmEvidence, choose_shm
from shmguard.estimate.policy import Policy, Sized, memory_limit_for, memory_margin
from shmguard.model.fix import Change, shm_changes
from shmguard.units import format_iec

#: The largest size any runtime takes, in bytes: Docker's ``HostConfig.ShmSize`` and
#: ``Memory`` are int64 (docker/docker api/types/container/hostconfig.go), and a Kubernetes
#: quantity beyond int64 no longer converts to bytes (apimachinery resource.Quantity
#: ``Value``); go-units' ``RAMInBytes`` overflows there too.
MAX_SIZE = 2**63 - 1

#: The most workers :func:`workers_that_fit` tries; an answer equal to it means "this many or
#: more".
WORKERS_LIMIT = 256


def parse_shape(text: str) -> tuple[int, ...]:
    """A sample shape written ``3,224,224`` (spaces allowed around the commas).

    Raises:
        ValueError: for anything but positive integers separated by commas (``3x224``, ``-1``,
            ``0``, an empty string, a dimension of more than 19 digits), with a message that
            quotes the text.
    """
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(
            f"invalid shape {text!r}: write positive integers separated by commas, e.g. 3,224,224"
        )
    if any(len(p.lstrip("0")) > 19 for p in parts):  # int() refuses 4300+ digits
        short = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"invalid shape {short!r}: a dimension has more than 19 digits")
    dims = tuple(int(p) for p in parts)
    if any(d < 1 for d in dims):
        raise ValueError(f"invalid shape {text!r}: every dimension must be >= 1")
    return dims


class PlanTooLarge(ValueError):
    """A plan whose /dev/shm size (``part`` ``"shm"``) or memory limit (``"memory"``) would
    be more than :data:`MAX_SIZE` bytes: no runtime can be given it, so there is nothing to
    print. ``size`` is the need (``"shm"``: the predicted peak) or the limit, in bytes."""

    def __init__(self, part: str, size: int) -> None:
        self.part = part
        self.size = size
        what = "a /dev/shm" if part == "shm" else "a memory limit"
        super().__init__(
            f"needs {what} of more than 8 EiB (2^63 - 1 bytes), the most Docker or Kubernetes takes"
        )


@dataclass(frozen=True)
class PlanRequest:
    """A DataLoader described by its parameters (what ``shmguard plan`` takes).

    Either ``batch_bytes`` (one collated batch's bytes; one more page is counted for the
    labels) or ``batch_size`` with ``sample_shape`` and ``dtype`` (a default-collated
    ``(sample, int label)`` batch) gives the batch. Sizes are int bytes.

    Attributes:
        num_workers: DataLoader ``num_workers`` (0: no shm).
        batch_size: samples per batch.
        sample_shape: one sample's tensor shape, e.g. ``(3, 224, 224)``.
        dtype: the sample's dtype name (:data:`~shmguard.estimate.dataloader.DTYPE_BYTES`).
        batch_bytes: one collated batch's bytes, instead of the shape.
        prefetch_factor, pin_memory, persistent_workers, drops_batch, local_ranks, loaders:
            as in :class:`~shmguard.estimate.dataloader.LoaderSpec`.
        model_peak: the training process's peak memory without /dev/shm (bytes), for the
            memory limit; None: no memory limit is given.

    Raises:
        ValueError: when neither or both ways of giving the batch are used, or a value is out
            of range (the message names the parameter).
    """

    num_workers: int
    batch_size: int | None = None
    sample_shape: tuple[int, ...] | None = None
    dtype: str = "float32"
    batch_bytes: int | None = None
    prefetch_factor: int = DEFAULT_PREFETCH_FACTOR
    pin_memory: bool = False
    persistent_workers: bool = False
    drops_batch: bool = False
    local_ranks: int = 1
    loaders: int = 1
    model_peak: int | None = None

    def __post_init__(self) -> None:
        shaped = self.batch_size is not None or self.sample_shape is not None
        if self.batch_bytes is not None and shaped:
            raise ValueError("give either batch bytes or batch size and sample shape, not both")
        if self.batch_bytes is None and (self.batch_size is None or self.sample_shape is None):
            raise ValueError("give batch size and sample shape, or batch bytes")
        if self.batch_bytes is not None and self.batch_bytes <= 0:
            raise ValueError(f"batch bytes must be > 0, got {self.batch_bytes}")
        if self.model_peak is not None and self.model_peak <= 0:
            raise ValueError(f"model peak must be > 0 bytes, got {self.model_peak}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {self.num_workers}")

    def storages(self) -> tuple[int, ...]:
        """``nbytes`` of each storage of one collated batch (data, labels)."""
        if self.batch_bytes is not None:
            return (self.batch_bytes, 0)
        assert self.batch_size is not None and self.sample_shape is not None
        return batch_leaves(self.batch_size, self.sample_shape, self.dtype)

    def spec(self) -> LoaderSpec:
        """The model's :class:`LoaderSpec` for this request."""
        return LoaderSpec(
            padded_bytes(self.storages()),
            self.num_workers,
            self.prefetch_factor,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers,
            drops_batch=self.drops_batch,
            local_ranks=self.local_ranks,
            loaders=self.loaders,
        )


@dataclass(frozen=True)
class Plan:
    """What a DataLoader needs, and the sizes and fix to ship.

    Attributes:
        request: what was asked.
        storages: the batch's storages in bytes (before page rounding).
        batch_pages: ``B'``, the batch in /dev/shm (storages rounded up to 4 KiB pages).
        prediction: the model's steady level, peak and notes for the node.
        shm: the /dev/shm size to ship and how it was reached; None with ``num_workers=0``.
        memory_limit: the memory limit to ship, or None without ``model_peak``.
        memory_basis: one sentence on the memory limit (or why there is none).
        changes: the fix as values (shm size, memory limit when known), for every runtime.
    """

    request: PlanRequest
    storages: tuple[int, ...]
    batch_pages: int
    prediction: LoaderPrediction
    shm: Sized | None
    memory_limit: int | None
    memory_basis: str
    changes: tuple[Change, ...] = ()


def make_plan(request: PlanRequest, policy: Policy | None = None) -> Plan:
    """The :class:`Plan` for ``request`` under ``policy``.

    shm: the one size decision (:func:`~shmguard.estimate.decide.choose_shm`) of the predicted
    peak (the node's: ranks x loaders): the policy's headroom, rounded. Memory limit (seed
    section 6.2): ``model_peak`` plus the pinned copies ``pin_memory`` keeps in ordinary
    memory, plus the shm size, plus the policy's margin, rounded (:func:`memory_limit_for`).

    Raises:
        PlanTooLarge: the shm size or the memory limit would be more than :data:`MAX_SIZE`.
        ValueError: for a request the model rejects (the message names the parameter).
    """
    policy = policy or Policy()
    spec = request.spec()
    pred = predict(spec)
    storages = tuple(request.storages())
    if pred.peak == 0:
        basis = "no /dev/shm is needed, so nothing sets a memory limit"
        return Plan(request, storages, spec.batch_pages, pred, None, None, basis)
    if pred.peak > MAX_SIZE:  # before choose_shm: a float of it may overflow
        raise PlanTooLarge("shm", pred.peak)
    shm = choose_shm(ShmEvidence(model=Need(pred.peak, "predicted peak")), policy)
    if shm.bytes > MAX_SIZE:
        raise PlanTooLarge("shm", shm.bytes)
    limit: int | None = None
    if request.model_peak is None:
        basis = "no --model-peak given: a memory limit needs the job's peak memory without /dev/shm"
    else:
        non_shm = request.model_peak + pred.pinned_memory
        limit = memory_limit_for(shm.bytes, policy, non_shm=non_shm)
        assert limit is not None
        if limit > MAX_SIZE:
            raise PlanTooLarge("memory", limit)
        margin = memory_margin(non_shm, policy)
        pinned = f" + pinned copies {format_iec(pred.pinned_memory)}" if pred.pinned_memory else ""
        basis = (
            f"model peak {format_iec(request.model_peak)}{pinned} + shm {format_iec(shm.bytes)}"
            f" + margin {format_iec(margin)} = "
            f"{format_iec(non_shm + shm.bytes + margin)}, rounded up to {format_iec(limit)}"
        )
    changes = shm_changes(shm.bytes, limit)
    return Plan(request, storages, spec.batch_pages, pred, shm, limit, basis, changes)


#: The :class:`PlanRequest` counts that multiply the batch, and their least values.
_COUNTS: dict[str, int] = {"num_workers": 1, "prefetch_factor": 1, "local_ranks": 1, "loaders": 1}


def too_large_by(request: PlanRequest, policy: Policy | None = None) -> tuple[str, ...]:
    """What makes ``request``'s /dev/shm size too large (:class:`PlanTooLarge`), to name it:
    ``"batch"`` when the batch alone is (every count at 1), and each count of
    ``num_workers``, ``prefetch_factor``, ``local_ranks``, ``loaders`` that alone is (with a
    one-byte batch and the other counts at 1). When none is alone, their product is: the
    batch and every count above 1 (``prefetch_factor`` above its default). Empty when the size
    is not too large."""

    def too_large(r: PlanRequest) -> bool:
        try:
            make_plan(replace(r, model_peak=None), policy)
        except PlanTooLarge:
            return True
        return False

    if not too_large(request):
        return ()
    least = replace(request, num_workers=1, prefetch_factor=1, local_ranks=1, loaders=1)
    tiny = replace(least, batch_bytes=1, batch_size=None, sample_shape=None)
    alone: tuple[str, ...] = ("batch",) if too_large(least) else ()
    alone += tuple(n for n in _COUNTS if too_large(replace(tiny, **{n: getattr(request, n)})))
    if alone:
        return alone
    usual = {**_COUNTS, "prefetch_factor": DEFAULT_PREFETCH_FACTOR}
    return ("batch", *(n for n, low in usual.items() if getattr(request, n) > low))


@dataclass(frozen=True)
class PlanFit:
    """The plan against a /dev/shm: ``fits`` when the predicted peak is at most ``free``."""

    path: str
    free: int
    total: int | None
    peak: int
    fits: bool


def check_fit(
    plan: Plan, free: int, *, path: str = "/dev/shm", total: int | None = None
) -> PlanFit:
    """Compare the plan's predicted peak with ``free`` bytes (statvfs ``f_bavail``) of ``path``.

    Raises:
        ValueError: for negative ``free``.
    """
    if free < 0:
        raise ValueError(f"negative free space: {free}")
    return PlanFit(path, free, total, plan.prediction.peak, plan.prediction.peak <= free)


def workers_that_fit(request: PlanRequest, free: int) -> int:
    """The most workers (up to :data:`WORKERS_LIMIT`) whose predicted peak fits in ``free``
    bytes, with ``request``'s other parameters
    (:func:`~shmguard.estimate.dataloader.max_workers`).

    Raises:
        ValueError: for negative ``free``.
    """
    spec = replace(request.spec(), num_workers=max(request.num_workers, 1))
    return max_workers(free, spec, limit=WORKERS_LIMIT)

"""The /dev/shm size the webhook gives a pod, and the memory limit it raises to.

The webhook builds the pod's evidence and asks the one size decision
(:func:`~shmguard.estimate.decide.choose_shm`), as ``check --fix`` does for a manifest; first
that applies:

1. the ``shmguard.io/shm-size`` annotation (or label), read as ``check --fix`` reads it (the
   one parser :func:`~shmguard.units.parse_size_annotation`: ``2Gi``, ``2G`` =
   2,000,000,000 bytes, ``2g`` = 2 GiB); one that does not parse is a problem (a warning) and
   the next source is used;
2. the sizing model, when ``shmguard.io/dataloader`` gives the loader's parameters
   (:func:`loader_request`): the predicted peak (:func:`~shmguard.estimate.dataloader.predict`,
   through :func:`~shmguard.estimate.plan.make_plan`) as the model's evidence: with the
   policy's headroom, rounded, the size ``shmguard plan`` prints;
3. the sizing policy's default, capped so the memory limit keeps the policy's margin: the
   value ``check --fix`` writes, never the whole memory limit (tmpfs pages are charged to the
   memory cgroup, kernel Documentation/admin-guide/cgroup-v2.rst "Memory Ownership", so a
   /dev/shm as large as the limit lets shm alone get the pod OOM-killed). Where the limit
   leaves no room, the decision's ``memory_limit`` is the limit a /dev/shm would need.

The raised memory limit (``shmguard.io/raise-memory-limit: "true"``) is the policy's
:func:`~shmguard.estimate.policy.memory_limit_for` of the current limit and the shm size: the
room the container had, plus the size, rounded up; never lower than the current limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from shmguard.estimate.decide import Need, ShmEvidence, choose_shm
from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.estimate.policy import Policy, Sized, memory_limit_for
from shmguard.sources.workload import Workload, parse_loader
from shmguard.units import DOCKER_DEFAULT_SHM, SizeError, format_iec, k8s_quantity_bytes

_INTS = ("num_workers", "prefetch_factor", "batch_size", "local_ranks", "loaders")
_BOOLS = ("pin_memory", "persistent_workers", "drops_batch")
#: Keys ``shmguard.io/dataloader`` takes (``sample_shape`` dims joined by ``x``: a comma
#: separates entries; ``batch_bytes`` a quantity).
LOADER_KEYS = (*_INTS, *_BOOLS, "sample_shape", "dtype", "batch_bytes")


def loader_request(value: str) -> PlanRequest:
    """``num_workers=4,batch_size=32,sample_shape=3x224x224,dtype=float32`` (or
    ``batch_bytes=19Mi`` instead of the shape) -> the sizing model's request.

    Raises:
        ValueError: for an unknown key, a value that does not parse, or a request the model
            rejects (the message names the key).
    """
    raw = parse_loader(value)
    unknown = sorted(set(raw) - set(LOADER_KEYS))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: {', '.join(LOADER_KEYS)})")
    kw: dict[str, object] = {}
    for k, v in raw.items():
        if k in _INTS:
            if not v.isdigit():
                raise ValueError(f"{k}={v!r}: expected a whole number")
            kw[k] = int(v)
        elif k in _BOOLS:
            if v.lower() not in ("true", "false"):
                raise ValueError(f"{k}={v!r}: expected true or false")
            kw[k] = v.lower() == "true"
        elif k == "sample_shape":
            dims = v.lower().split("x")
            if not all(d.isdigit() and int(d) > 0 for d in dims):
                raise ValueError(f"sample_shape={v!r}: expected dimensions like 3x224x224")
            kw[k] = tuple(int(d) for d in dims)
        elif k == "batch_bytes":
            try:
                kw[k] = k8s_quantity_bytes(v)
            except SizeError as err:
                raise ValueError(f"batch_bytes={v!r}: {err}") from None
        else:
            kw[k] = v
    if "num_workers" not in kw:
        raise ValueError("num_workers is missing")
    nw = kw.pop("num_workers")
    assert isinstance(nw, int)
    return PlanRequest(nw, **kw)  # type: ignore[arg-type]


def choose_size(
    annotations: Mapping[str, str],
    workload: Workload,
    memory_limit: int | None,
    policy: Policy,
    *,
    size_key: str,
    loader_key: str,
) -> Sized:
    """The /dev/shm size for a pod with ``annotations`` (see the module docstring for the
    order); ``workload`` is the class (and the stated ``shmguard.io/shm-size``) of a container
    that needs it, ``memory_limit`` the smallest memory limit (bytes) of the containers that
    get it, or None.

    Returns:
        the decision's :class:`~shmguard.estimate.policy.Sized`; ``basis`` in the webhook's
        words (``sizing model: ...``, ``sizing policy default``), ``problems`` the
        annotations that could not be read, ``memory_limit`` set when the limit leaves no
        room beside the policy's margin.
    """
    problems: list[str] = []
    model = None
    loader = annotations.get(loader_key)
    if loader is not None:
        try:
            plan = make_plan(loader_request(loader), policy)
        except ValueError as err:
            problems.append(f"{loader_key} ignored: {err}")
        else:
            if plan.shm is not None:
                model = Need(plan.prediction.peak, "predicted peak")
            else:
                problems.append(f"{loader_key}: num_workers=0 uses no /dev/shm for batches")
    stated = workload.shm_size
    evidence = ShmEvidence(
        configured=None if stated is None else (size_key, stated),
        model=model,
        memory_limit=memory_limit,
        current=DOCKER_DEFAULT_SHM,
    )
    sized = choose_shm(evidence, policy)
    if sized.source == "model":
        basis = f"sizing model: {sized.basis}"
    elif sized.source != "default":
        basis = sized.basis
    elif sized.memory_limit is not None:
        assert memory_limit is not None
        basis = (
            f"the {format_iec(memory_limit)} memory limit leaves no room beside the policy's "
            f"{format_iec(policy.memory_margin)} margin"
        )
    elif sized.bytes < policy.default_shm_size:
        basis = (
            f"sizing policy default, capped at what the {format_iec(memory_limit or 0)} "
            "memory limit leaves after the margin"
        )
    else:
        basis = "sizing policy default"
    # The loader's problems only where the loader could have decided (as before the one
    # decision: a size annotation that parses makes the loader's parameters moot).
    loader_problems = () if sized.source == "configured" else tuple(problems)
    return replace(sized, basis=basis, problems=(*sized.problems, *loader_problems))


def raised_limit(current: int, shm: int, policy: Policy) -> int:
    """The memory limit for a container whose limit is ``current`` bytes once it gets a
    /dev/shm of ``shm`` bytes (:func:`~shmguard.estimate.policy.memory_limit_for`)."""
    limit = memory_limit_for(shm, policy, current_limit=current)
    assert limit is not None
    return limit

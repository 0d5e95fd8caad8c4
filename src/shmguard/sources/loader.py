"""A workload's stated sizing evidence -> the one size decision's input.

``check --fix`` (:func:`shmguard.lint.config._base.fix_sized`) and the webhook
(:func:`shmguard.fleet.sizing.choose_size`) both size a /dev/shm from what a workload's
``shmguard.io/`` annotations (or labels) state; :func:`workload_evidence` reads them once:

* ``shmguard.io/shm-size``: a configured size (text, read by
  :func:`~shmguard.units.parse_size_annotation` inside the decision);
* ``shmguard.io/dataloader``: the loader's parameters (:func:`loader_request`) -> the
  DataLoader model's predicted peak (:func:`~shmguard.estimate.plan.make_plan`) as the
  ``model`` evidence, the figure ``shmguard plan`` sizes from;
* the memory limit (bytes, from the container) for the decision's "no room" answer.

An annotation that cannot be read is a problem (a sentence naming it) and is skipped; so is a
``shmguard.io/shm-size`` at or below the runtimes' 64 MiB default (a fix never writes such a size:
the policy's sizes decide, as for a ``sizeLimit: 64Mi`` already there).
"""

from __future__ import annotations

from dataclasses import replace

from shmguard.config import ANNOTATIONS
from shmguard.estimate.decide import Documented, Need, ShmEvidence, choose_shm
from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.estimate.policy import Policy, Sized
from shmguard.sources.workload import Workload, parse_loader
from shmguard.sources.workload_tokens import DOCUMENTED_SHM
from shmguard.units import (
    DOCKER_DEFAULT_SHM,
    SizeError,
    format_iec,
    parse_size_annotation,
    shown_size_text,
)

_INTS = ("num_workers", "prefetch_factor", "batch_size", "local_ranks", "loaders")
_BOOLS = ("pin_memory", "persistent_workers", "drops_batch")
#: Keys ``shmguard.io/dataloader`` takes (``sample_shape`` dims joined by ``x``: a comma
#: separates entries; ``batch_bytes`` a size as :func:`~shmguard.units.parse_size_annotation`
#: reads it: ``19Mi``, ``2g`` = 2 GiB, ``2G`` = 2,000,000,000 bytes).
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
                kw[k] = parse_size_annotation(v)
            except SizeError as err:
                raise ValueError(f"batch_bytes={v!r}: {err}") from None
        else:
            kw[k] = v
    if "num_workers" not in kw:
        raise ValueError("num_workers is missing")
    nw = kw.pop("num_workers")
    assert isinstance(nw, int)
    return PlanRequest(nw, **kw)  # type: ignore[arg-type]


def workload_evidence(
    workload: Workload,
    memory_limit: int | None,
    policy: Policy,
    *,
    flag: int | None = None,
) -> tuple[ShmEvidence, tuple[str, ...]]:
    """The evidence ``workload`` states (module docstring), with ``flag`` (``--shm-size``,
    bytes, or None), ``memory_limit`` (bytes, or None) and the runtime's 64 MiB there now.

    Returns:
        the evidence and the problems of a ``shmguard.io/dataloader`` that could not be read
        (or that uses no /dev/shm: ``num_workers=0``).
    """
    key = ANNOTATIONS["dataloader"]
    problems: list[str] = []
    model = None
    if workload.loader is not None:
        try:
            plan = make_plan(loader_request(workload.loader), policy)
        except ValueError as err:
            problems.append(f"{key} ignored: {err}")
        else:
            if plan.shm is not None:
                model = Need(plan.prediction.peak, "predicted peak")
            else:
                problems.append(f"{key}: num_workers=0 uses no /dev/shm for batches")
    stated = workload.shm_size
    documented = DOCUMENTED_SHM.get(workload.cls)
    evidence = ShmEvidence(
        flag=flag,
        configured=None if stated is None else (ANNOTATIONS["shm-size"], stated),
        model=model,
        documented=Documented(*documented) if documented is not None else None,
        memory_limit=memory_limit,
        current=DOCKER_DEFAULT_SHM,
    )
    return evidence, tuple(problems)


def workload_sized(
    workload: Workload,
    memory_limit: int | None,
    policy: Policy,
    *,
    flag: int | None = None,
) -> Sized:
    """The one size decision (:func:`~shmguard.estimate.decide.choose_shm`) over
    :func:`workload_evidence`; ``problems`` adds the loader's where the loader could have
    decided (a flag or a size annotation that parses makes its parameters moot)."""
    evidence, loader_problems = workload_evidence(workload, memory_limit, policy, flag=flag)
    sized = choose_shm(evidence, policy)
    if sized.source == "configured" and sized.bytes <= DOCKER_DEFAULT_SHM:
        # A fix never writes a size at or below the runtimes' default (issue 21): the
        # annotation is skipped with a warning, as one that does not parse, in check --fix and
        # the webhook alike, and the next source decides.
        problem = (
            f"{ANNOTATIONS['shm-size']}={shown_size_text(workload.shm_size or '')} ignored: "
            f"{format_iec(sized.bytes)} is not above the runtimes' "
            f"{format_iec(DOCKER_DEFAULT_SHM)} default /dev/shm, and a fix never writes such a "
            "size"
        )
        sized = choose_shm(replace(evidence, configured=None), policy)
        sized = replace(sized, problems=(problem, *sized.problems))
    if sized.source in ("flag", "configured") or not loader_problems:
        return sized
    return replace(sized, problems=(*sized.problems, *loader_problems))

"""The /dev/shm size the webhook gives a pod, and the memory limit it raises to.

The webhook builds the pod's evidence and asks the one size decision
(:func:`~shmguard.estimate.decide.choose_shm`), as ``check --fix`` does for a manifest; first
that applies:

1. the ``shmguard.io/shm-size`` annotation (or label), read as ``check --fix`` reads it (the
   one parser :func:`~shmguard.units.parse_size_annotation`: ``2Gi``, ``2G`` =
   2,000,000,000 bytes, ``2g`` = 2 GiB); one that does not parse is a problem (a warning) and
   the next source is used;
2. the sizing model, when ``shmguard.io/dataloader`` gives the loader's parameters
   (:func:`~shmguard.sources.loader.loader_request`): the predicted peak
   (:func:`~shmguard.estimate.dataloader.predict`, through
   :func:`~shmguard.estimate.plan.make_plan`) as the model's evidence: with the policy's
   headroom, rounded, the size ``shmguard plan`` prints and ``check --fix`` writes;
3. the sizing policy's default, capped so the memory limit keeps the policy's margin: the
   value ``check --fix`` writes, never the whole memory limit (tmpfs pages are charged to the
   memory cgroup, kernel Documentation/admin-guide/cgroup-v2.rst "Memory Ownership", so a
   /dev/shm as large as the limit lets shm alone get the pod OOM-killed).

Where the limit leaves no room beside the policy's margin for the model's size or the capped
default, the decision's ``memory_limit`` is the limit that /dev/shm would need (the webhook
then skips the pod, unless asked to raise the limit).

The raised memory limit (``shmguard.io/raise-memory-limit: "true"``) is the policy's
:func:`~shmguard.estimate.policy.memory_limit_for` of the current limit and the shm size: the
room the container had, plus the size, rounded up; never lower than the current limit.

Every size the webhook writes is checked first (:func:`quantity_problem`): a Kubernetes
quantity of whole bytes that reads back as the same bytes, at most 2^63 - 1 (8 EiB: "no
quantity may represent a number greater than 2^63-1 in magnitude", k8s.io/apimachinery
``resource.Quantity``), and a /dev/shm at least the sizing policy's smallest size
(:data:`SMALLEST_SHM`). A ``shmguard.io/shm-size`` at or below the runtimes' 64 MiB default
(``"1"``, one byte; ``32Mi``) is a problem, as one that does not parse, in ``check --fix`` too
(:func:`~shmguard.sources.loader.workload_sized`): the next source decides.
"""

from __future__ import annotations

from dataclasses import replace

from shmguard.estimate.policy import Policy, Sized, clean_size, memory_limit_for
from shmguard.fleet.pods import QUANTITY_MAX
from shmguard.sources.loader import LOADER_KEYS as LOADER_KEYS
from shmguard.sources.loader import loader_request as loader_request
from shmguard.sources.loader import workload_sized
from shmguard.sources.workload import Workload
from shmguard.units import (
    SizeError,
    format_iec,
    format_k8s_quantity,
    k8s_quantity_bytes,
)

#: The smallest /dev/shm the webhook writes: the sizing policy's smallest size (what
#: :func:`~shmguard.estimate.policy.clean_size` rounds anything below up to, 1 MiB).
SMALLEST_SHM = clean_size(0)


def quantity_problem(n: int, what: str, least: int = 1) -> str | None:
    """Why ``n`` bytes cannot be written as ``what`` (``sizeLimit``, ``memory limit``) in a
    pod spec, in one sentence, or None: below ``least``, above :data:`QUANTITY_MAX`, or a
    quantity that does not read back as ``n`` bytes."""
    if n > QUANTITY_MAX:  # not formatted: format_iec's float division overflows on huge ints
        return f"the {what} is over the 8 EiB (2^63 - 1 bytes) a Kubernetes quantity holds"
    if n < least:
        return f"the {what}, {format_iec(max(n, 0))}, is below the least, {format_iec(least)}"
    text = format_k8s_quantity(n)
    try:
        back = k8s_quantity_bytes(text)
    except SizeError:
        back = None
    if back != n:
        return f"the {what} {text!r} is not a Kubernetes quantity of {n} bytes"
    return None


def choose_size(workload: Workload, memory_limit: int | None, policy: Policy) -> Sized:
    """The /dev/shm size for a pod (see the module docstring for the order): ``workload``
    is the class and the stated ``shmguard.io/shm-size`` and ``shmguard.io/dataloader`` of a
    container that needs it, ``memory_limit`` the smallest memory limit (bytes) of the
    containers that get it, or None; the evidence is ``check --fix``'s
    (:func:`~shmguard.sources.loader.workload_sized`).

    Returns:
        the decision's :class:`~shmguard.estimate.policy.Sized`; ``basis`` in the webhook's
        words (``sizing model: ...``, ``sizing policy default``), ``problems`` the
        annotations that could not be read, ``memory_limit`` set when the limit leaves no
        room for the size beside the policy's margin.
    """
    sized = workload_sized(workload, memory_limit, policy)
    if sized.memory_limit is not None:  # "no room": only where a limit was given
        assert memory_limit is not None
        basis = (
            f"the {format_iec(memory_limit)} memory limit leaves no room beside the policy's "
            f"{format_iec(policy.memory_margin)} margin"
        )
        if sized.source == "model":
            basis += " for the sizing model's size"
    elif sized.source == "model":
        basis = f"sizing model: {sized.basis}"
    elif sized.source != "default":
        basis = sized.basis
    elif sized.bytes < policy.default_shm_size:
        basis = (
            f"sizing policy default, capped at what the {format_iec(memory_limit or 0)} "
            "memory limit leaves after the margin"
        )
    else:
        basis = "sizing policy default"
    return replace(sized, basis=basis)


def raised_limit(current: int, shm: int, policy: Policy) -> int:
    """The memory limit for a container whose limit is ``current`` bytes once it gets a
    /dev/shm of ``shm`` bytes (:func:`~shmguard.estimate.policy.memory_limit_for`)."""
    limit = memory_limit_for(shm, policy, current_limit=current)
    assert limit is not None
    return limit

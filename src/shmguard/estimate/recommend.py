"""From measured figures to the sizes to ship: shm with headroom, memory limit with a margin.

The rules are the sizing policy's (:mod:`shmguard.estimate.policy`); docs/measure.md, "How the
recommendation is made", shows them on a run:

* shm: the one size decision (:func:`~shmguard.estimate.decide.choose_shm`) of the need
  (measured peak, or probe's reliable minimum when larger) and, for a PyTorch DataLoader seen
  in the run (``torch_*`` blocks from W processes, the largest of B bytes), the DataLoader
  model's peak for it (:func:`~shmguard.estimate.observed.observed_loader`: prefetch_factor 2
  unless the peak says more). The larger of the two gets the headroom. One run of a consumer
  faster than its workers can leave the prefetch queue part-empty and peak at about half of
  the model's peak (docs/background.md, "How much is needed"), so the measured peak alone can
  understate what the next run needs;
* memory limit: the cgroup's own peak already includes the shm the job used (tmpfs pages are
  charged to it), so summing process RSS would count every mapped batch once per process. The
  non-shm part is the largest ``cgroup usage - shm used`` seen (at least ``cgroup peak - shm
  peak``); the limit is :func:`~shmguard.estimate.policy.memory_limit_for` of it;
* without a memory measurement but with the current limit (``recommend --prometheus`` reads
  the exporter's ``shmguard_cgroup_memory_limit_bytes``): the room the job had beside its
  current /dev/shm plus the new size, never lower than the current limit
  (:func:`~shmguard.estimate.policy.memory_limit_for` with ``current_limit``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shmguard.estimate.decide import Need, ShmEvidence, choose_shm
from shmguard.estimate.policy import (
    MEMORY_MARGIN_FRACTION,
    Policy,
    memory_limit_for,
    memory_margin,
)
from shmguard.model.fact import Fact
from shmguard.model.fix import Change, shm_changes
from shmguard.units import format_iec


@dataclass(frozen=True)
class Recommendation:
    """The sizes to configure and how they were derived.

    Attributes:
        shm_size: bytes of /dev/shm to configure, or None when the data cannot support one.
        shm_basis: one sentence: the figure used, the headroom and the rounding (or why none).
        headroom: the fraction added (0.25 = 25%).
        memory_limit: container memory limit in bytes, or unknown with the reason.
        memory_basis: one sentence on how the memory limit was derived.
        changes: the fix as values (shm size, memory limit when known), for every runtime;
            empty without a shm size.
    """

    shm_size: int | None
    shm_basis: str
    headroom: float
    memory_limit: Fact[int]
    memory_basis: str
    changes: tuple[Change, ...] = ()


def no_recommendation(
    reason: str, headroom: float | None = None, policy: Policy | None = None
) -> Recommendation:
    """A :class:`Recommendation` without sizes: ``reason`` says why none can be given;
    ``headroom`` (default: the policy's) is what a size would have had."""
    return Recommendation(
        None,
        reason,
        headroom if headroom is not None else (policy or Policy()).headroom,
        Fact.unknown("no shm size could be recommended"),
        "no shm size, so no memory limit",
    )


def recommend(
    need: int | None,
    need_basis: str,
    *,
    policy: Policy | None = None,
    headroom: float | None = None,
    cgroup_peak: Fact[int] | None = None,
    shm_peak: int = 0,
    non_shm_seen: int | None = None,
    model: Need | None = None,
    need_floor: Need | None = None,
    current_limit: int | None = None,
    current_shm: int = 0,
    keep_current: bool = False,
) -> Recommendation:
    """Build a :class:`Recommendation`.

    Args:
        need: bytes of shm the job needs (measured peak or probed minimum), or None.
        need_basis: what ``need`` is, or why there is none (e.g. "the run ran out of shm").
        policy: the sizing policy (default :class:`Policy`); ``headroom``, when given,
            replaces its headroom.
        cgroup_peak: the memory cgroup's peak bytes (a Fact), or None when not measured.
        shm_peak: measured shm peak bytes.
        non_shm_seen: largest ``cgroup usage - shm used`` seen at the same instant, or None.
        model: the DataLoader model's peak for a loader seen in the run, or None: combined
            with ``need`` before headroom (the larger counts).
        need_floor: bytes the shm size must reach whatever the headroom gives (a
            configured need), or None.
        current_limit: the memory limit in force, used when ``cgroup_peak`` is None: the
            limit is then raised by what the new /dev/shm needs, never cut.
        current_shm: bytes of the /dev/shm beside ``current_limit`` now.
        keep_current: propose ``current_shm`` itself, to the byte, instead of the size the
            need gives (the caller decided the current one is enough; rounding it up to a
            clean size would propose a change while saying it keeps the size). The basis is
            still the need's: the caller says why it keeps the current one.

    Raises:
        ValueError: for a negative or non-finite headroom.
    """
    policy = policy or Policy()
    if headroom is not None:
        policy = replace(policy, headroom=headroom)
    if need is None or need <= 0:
        basis = need_basis
        if need is not None:
            basis = (
                f"{need_basis} 0 B: the command used no /dev/shm, so any size works "
                "(the runtimes' default 64 MiB included)"
            )
        return no_recommendation(basis, policy=policy)
    evidence = ShmEvidence(measured=Need(need, need_basis), model=model, need_floor=need_floor)
    sized = choose_shm(evidence, policy)
    if keep_current and current_shm > 0:
        sized = replace(sized, bytes=current_shm)
    shm = sized.bytes
    memory: Fact[int]
    if cgroup_peak is None and current_limit is not None:
        memory, basis = _from_current_limit(shm, current_limit, current_shm, policy)
    elif cgroup_peak is None:
        memory = Fact.unknown("memory was not measured")
        basis = "memory was not measured"
    elif cgroup_peak.value is None:
        memory = Fact.unknown(cgroup_peak.reason or "memory cgroup peak unknown")
        basis = f"no memory cgroup peak: {cgroup_peak.reason}"
    else:
        non_shm = max(cgroup_peak.value - shm_peak, non_shm_seen or 0, 0)
        margin = memory_margin(non_shm, policy)
        mem = memory_limit_for(shm, policy, non_shm=non_shm)
        assert mem is not None  # non_shm is known
        memory = Fact.known(mem)
        basis = (
            f"cgroup peak {format_iec(cgroup_peak.value)} includes the shm pages; non-shm use "
            f"{format_iec(non_shm)} + shm size {format_iec(shm)} + margin {format_iec(margin)} "
            f"({MEMORY_MARGIN_FRACTION:.0%}, at least {format_iec(policy.memory_margin)}) = "
            f"{format_iec(non_shm + shm + margin)}, rounded up to {format_iec(mem)}"
        )
    return Recommendation(
        shm, sized.basis, policy.headroom, memory, basis, shm_changes(shm, memory.value)
    )


def _from_current_limit(
    shm: int, current_limit: int, current_shm: int, policy: Policy
) -> tuple[Fact[int], str]:
    """The memory limit beside a /dev/shm of ``shm`` bytes from the limit in force, and its
    basis sentence (no measurement of the non-shm use: raised, never cut)."""
    mem = memory_limit_for(shm, policy, current_limit=current_limit, current_shm=current_shm)
    assert mem is not None  # current_limit is known
    left = current_limit - current_shm
    room = max(left, policy.memory_margin)
    basis = (
        f"no measured non-shm use: the current limit {format_iec(current_limit)} leaves "
        f"{format_iec(max(left, 0))} beside the current /dev/shm {format_iec(current_shm)}"
    )
    if room > left:
        basis += f", raised to the {format_iec(policy.memory_margin)} margin"
    basis += "; "
    if mem == current_limit:
        basis += f"with /dev/shm {format_iec(shm)} it still fits: kept"
    else:
        basis += (
            f"{format_iec(room)} + shm size {format_iec(shm)} = {format_iec(room + shm)}, "
            f"rounded up to {format_iec(mem)}"
        )
    return Fact.known(mem), basis

"""The one sizing policy: how a need becomes a size to ship, and what memory limit goes with it.

Every command that prints or writes a size goes through these functions (doctor, explain,
measure, probe, plan, check and its fixes, watch and rightsize, the guard, tune and the
admission webhook), so one need gives one size everywhere. docs/background.md, "How shmguard
sizes", states the policy once:

* **rounding**: up to a clean value, a multiple of a quarter of the largest power of two not
  above it, at least 1 MiB (:func:`clean_size`: 160 MiB stays, 207 MiB -> 224 MiB,
  1.3 GiB -> 1.5 GiB);
* **headroom**: a measured or stated need (the larger of the DataLoader model's peak and the
  measured peak, combined before headroom: :mod:`shmguard.estimate.decide`) gets ``headroom``
  (25%) on top, then is raised to any floor, then rounded (:func:`shm_size_for`);
* **alert relation**: a size from a need keeps that need (a peak) strictly below
  :data:`ALERT_PERCENT` (80%) of it: ``watch`` fires at a window peak >= 80%
  (``monitor.watch.Monitor``'s default threshold) and the shipped ``ShmguardShmAlmostFull``
  alert (deploy/prometheus/shmguard-rules.yaml) at > 80%. ``need x 1.25`` rounded up is
  <= 80% of the size, exactly 80% when no rounding happened; then one more rounding step;
* **memory limit** (seed section 6.2): non-shm peak + shm size + a margin of 25% of the non-shm
  part, at least 1 GiB, rounded up to 256 MiB steps (whole GiB above 4 GiB:
  :func:`clean_memory`, :func:`memory_limit_for`); tmpfs pages are charged to the
  memory cgroup (kernel Documentation/admin-guide/cgroup-v2.rst, "Memory Ownership"), so a
  /dev/shm the job may fill must fit beside everything else;
* **default**: when nothing says what the job needs, 1 GiB (configurable), never above what the
  memory limit leaves after the margin (:func:`default_shm_size`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shmguard.units import DOCKER_DEFAULT_SHM, GiB, MiB, format_iec, round_up

#: Fraction added to a measured or stated need.
DEFAULT_HEADROOM = 0.25
#: The fill level, in percent, at which shmguard's own alarms go off: ``watch``'s default
#: ``--threshold`` (a window peak >= 80%, ``monitor.watch.Monitor``) and the shipped Prometheus
#: rule ``ShmguardShmAlmostFull`` (``used / size > 80`` for 5 minutes,
#: deploy/prometheus/shmguard-rules.yaml). A size from a need keeps the need strictly below it.
ALERT_PERCENT = 80
#: Least memory a limit must leave beside a full /dev/shm (seed section 6.2).
MEMORY_MARGIN_MIN = GiB
#: Margin as a fraction of the non-shm peak, when that is larger than the minimum.
MEMORY_MARGIN_FRACTION = 0.25
#: The size written when nothing says what the job needs: enough for a typical image
#: DataLoader (4 workers x prefetch 2 + 2 float32 batches of 32x3x224x224 = 184 MiB) several
#: times over, and small against a training node's memory.
DEFAULT_SHM_SIZE = GiB


@dataclass(frozen=True)
class Policy:
    """The policy's tunables (``[tool.shmguard.sizes]`` in the configuration).

    Attributes:
        headroom: fraction added to a need (>= 0, finite).
        memory_margin: least bytes a memory limit leaves beside a full /dev/shm.
        default_shm_size: bytes written when nothing is known.

    Raises:
        ValueError: for a negative or non-finite headroom or a size <= 0.
    """

    headroom: float = DEFAULT_HEADROOM
    memory_margin: int = MEMORY_MARGIN_MIN
    default_shm_size: int = DEFAULT_SHM_SIZE

    def __post_init__(self) -> None:
        if not math.isfinite(self.headroom) or self.headroom < 0:
            raise ValueError(f"headroom must be a finite number >= 0, got {self.headroom}")
        if self.memory_margin <= 0 or self.default_shm_size <= 0:
            raise ValueError("memory margin and default shm size must be > 0 bytes")


def _step(n: int) -> int:
    return max(MiB, (1 << (n.bit_length() - 1)) // 4)


def clean_size(n: int) -> int:
    """Round ``n`` bytes up to a clean value: a multiple of 1/4 of the largest power of two
    <= ``n``, and at least 1 MiB (so 64 MiB stays 64 MiB, 65 MiB -> 80 MiB, 207 MiB -> 224 MiB).

    Raises:
        ValueError: for a negative ``n``.
    """
    if n < 0:
        raise ValueError(f"negative size: {n}")
    if n <= MiB:
        return MiB
    return round_up(n, _step(n))


def clean_size_down(n: int) -> int:
    """Round ``n`` bytes *down* to a clean value (the same steps as :func:`clean_size`), for
    caps that must not be exceeded; at least 1 MiB.

    Raises:
        ValueError: for a negative ``n``.
    """
    if n < 0:
        raise ValueError(f"negative size: {n}")
    if n <= MiB:
        return MiB
    return max(MiB, n // _step(n) * _step(n))


#: Where a size came from (:attr:`Sized.source`), in the order of precedence of
#: :func:`shmguard.estimate.decide.choose_shm`: the user's flag; the annotation or
#: configuration; a size a log states or suggests; a request that failed; the DataLoader
#: model's predicted peak; a measured peak; a /dev/shm that ran short; a size a failure
#: signature or workload class documents; the policy's default.
SOURCES = (
    "flag",
    "configured",
    "log",
    "request",
    "model",
    "measured",
    "ran-short",
    "documented",
    "default",
)


@dataclass(frozen=True)
class Sized:
    """A /dev/shm size and how it was chosen: the one value every command prints or writes.

    Attributes:
        bytes: the /dev/shm size to ship. With ``memory_limit`` set, the size to ship
            *together with* that raised limit (it does not fit under the limit there now).
        basis: one sentence, how it was reached (what commands print after "size:").
        source: which evidence decided it, one of :data:`SOURCES`.
        problems: evidence that could not be used, one sentence each (an annotation that
            does not parse), for the caller to show as warnings.
        memory_limit: None, or the memory limit (bytes) to raise to: the limit there now
            leaves no room for ``bytes`` beside the policy's margin ("no room" answer: the
            fix is the memory limit, and ``bytes`` only with it).
    """

    bytes: int
    basis: str
    source: str = "measured"
    problems: tuple[str, ...] = ()
    memory_limit: int | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown size source {self.source!r} (known: {', '.join(SOURCES)})")


def shm_size_for(
    need: int,
    policy: Policy = Policy(),
    *,
    floor: int | None = None,
    floor_basis: str = "",
    what: str = "need",
    source: str = "measured",
) -> Sized:
    """The /dev/shm size for a need of ``need`` bytes: ``need x (1 + headroom)``, raised to
    ``floor`` when that is larger, rounded up with :func:`clean_size`; when the need is then
    still at or above :data:`ALERT_PERCENT` of the size (no rounding happened), one more
    rounding step, so the need stays strictly under the alert threshold. (Only with a
    headroom of at least 25%: a smaller configured headroom accepts a fuller /dev/shm.)

    ``what`` names the need in the basis ("measured peak"), ``floor_basis`` the floor;
    ``source`` is the :attr:`Sized.source` of the answer.

    Raises:
        ValueError: for ``need`` <= 0.
    """
    if need <= 0:
        raise ValueError(f"a need must be > 0 bytes, got {need}")
    grown = int(need * (1 + policy.headroom))
    basis = f"{what} {format_iec(need)} + {policy.headroom:.0%} headroom = {format_iec(grown)}"
    if floor is not None and floor > grown:
        basis += f", raised to {floor_basis + ' ' if floor_basis else ''}{format_iec(floor)}"
        grown = floor
    size = clean_size(grown)
    basis += f", rounded up to {format_iec(size)}"
    if (1 + policy.headroom) * ALERT_PERCENT >= 100 and need * 100 >= size * ALERT_PERCENT:
        size = clean_size(size + 1)
        basis += (
            f", one step more to {format_iec(size)} so the need stays under "
            f"{ALERT_PERCENT}% of it (watch's threshold and the ShmguardShmAlmostFull alert)"
        )
    if size <= DOCKER_DEFAULT_SHM:
        basis += (
            f" (within the {format_iec(DOCKER_DEFAULT_SHM)} Docker, containerd and CRI-O give "
            "by default: keep a larger /dev/shm you have)"
        )
    return Sized(size, basis, source)


def clean_memory(n: int) -> int:
    """Round a memory limit of ``n`` bytes up to what people write: 256 MiB steps up to 4 GiB,
    whole GiB above (a quarter-power step would add up to 25% of a large limit).

    Raises:
        ValueError: for a negative ``n``.
    """
    if n < 0:
        raise ValueError(f"negative size: {n}")
    return max(256 * MiB, round_up(n, 256 * MiB if n <= 4 * GiB else GiB))


def memory_margin(non_shm: int, policy: Policy = Policy()) -> int:
    """Bytes a memory limit keeps beside non-shm use and a full /dev/shm: 25% of ``non_shm``,
    at least ``policy.memory_margin`` (seed section 6.2)."""
    return max(policy.memory_margin, int(max(non_shm, 0) * MEMORY_MARGIN_FRACTION))


def memory_limit_for(
    shm_size: int,
    policy: Policy = Policy(),
    *,
    non_shm: int | None = None,
    current_limit: int | None = None,
    current_shm: int = 0,
) -> int | None:
    """The memory limit to ship with a /dev/shm of ``shm_size`` bytes, or None when nothing
    says what the rest of the job uses.

    * ``non_shm`` known (a measured peak without the shm pages): ``non_shm + shm_size +``
      :func:`memory_margin`, rounded up with :func:`clean_memory`;
    * else ``current_limit`` known: the room the job had beside its current /dev/shm
      (``current_limit - current_shm``, at least the margin) plus ``shm_size``, rounded up;
      never lower than ``current_limit`` (a limit is raised, not cut, without a measurement).
    """
    if non_shm is not None:
        return clean_memory(max(non_shm, 0) + shm_size + memory_margin(non_shm, policy))
    if current_limit is None:
        return None
    room = max(current_limit - current_shm, policy.memory_margin)
    wanted = room + shm_size
    return current_limit if wanted <= current_limit else clean_memory(wanted)


def default_shm_size(
    policy: Policy = Policy(),
    *,
    memory_limit: int | None = None,
    too_small: int | None = None,
    current: int | None = None,
) -> Sized:
    """The size to write when nothing says what the job needs.

    ``policy.default_shm_size`` (1 GiB), or twice ``too_small`` (a /dev/shm known to have run
    out, or to be nearly full) when that is larger. A plain default is capped at what
    ``memory_limit`` leaves after the margin (rounded down, at least 64 MiB), so shm alone
    cannot get the container OOM-killed, but only while the cap still gives more than
    ``current`` (the /dev/shm there is now) and ``too_small``: a fix never shrinks /dev/shm or
    leaves it as it is. Below that the default stands, and the memory limit must grow with it
    (:func:`memory_limit_for`).
    """
    size = policy.default_shm_size
    basis = "the default starting point; measure the real need with `shmguard measure`"
    if too_small is not None and 2 * too_small > size:
        size = clean_size(2 * too_small)
        return Sized(size, f"twice the {format_iec(too_small)} that ran short", "ran-short")
    if memory_limit is not None and memory_limit - policy.memory_margin < size:
        # Never below the 64 MiB the runtimes give by themselves.
        cap = max(DOCKER_DEFAULT_SHM, clean_size_down(max(memory_limit - policy.memory_margin, 0)))
        if max(current or 0, too_small or 0) < cap < size:
            size = cap
            basis = (
                f"the default, capped at what the {format_iec(memory_limit)} memory limit "
                f"leaves after a {format_iec(policy.memory_margin)} margin"
            )
        elif cap < size:
            basis = (
                f"the default; the {format_iec(memory_limit)} memory limit leaves too little "
                f"beside a {format_iec(policy.memory_margin)} margin for any larger /dev/shm, "
                "so the limit must grow with it"
            )
    return Sized(size, basis, "default")

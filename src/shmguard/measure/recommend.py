"""From measured figures to the sizes to ship: shm with headroom, memory limit with a margin.

Rules (docs/measure.md, "How the recommendation is made"):

* shm: the need (measured peak, or probe's reliable minimum when larger) times ``1 + headroom``,
  rounded *up* to a clean value: a multiple of a quarter of the power of two below it
  (160 MiB -> 160m, 207 MiB -> 224m, 1.3 GiB -> 1.5g), at least 1 MiB.
* a PyTorch DataLoader seen in the run (``torch_*`` blocks from W processes, the largest of B
  bytes) sets a floor: :func:`dataloader_bound` with the default ``prefetch_factor`` 2. One
  run of a consumer faster than its workers can leave the prefetch queue part-empty and peak
  at about half of that (docs/background.md, "How much is needed"), so the measured peak alone
  can understate what the next run needs.
* memory limit: tmpfs pages are charged to the memory cgroup (config_formats.md 1.3), so the
  cgroup's own peak already includes the shm the job used; summing process RSS would count
  every mapped batch once per process. The non-shm part is the largest
  ``cgroup usage - shm used`` seen (at least ``cgroup peak - shm peak``); the limit is that plus
  the recommended shm size (the job may fill it) plus a margin of 25% of the non-shm part and
  at least 1 GiB (seed section 6.2: memory limit minus shm should leave >= 1 GiB), rounded up
  to a clean value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shmguard.model.fact import Fact
from shmguard.model.finding import Snippet
from shmguard.render.snippets import render_snippets
from shmguard.units import PAGE_SIZE, GiB, MiB, format_iec, round_up

#: Default shm headroom over the measured need.
DEFAULT_HEADROOM = 0.25
#: Minimum memory margin above non-shm use + shm size (seed section 6.2).
MEMORY_MARGIN_MIN = 1 * GiB
MEMORY_MARGIN_FRACTION = 0.25


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
    step = max(MiB, (1 << (n.bit_length() - 1)) // 4)
    return round_up(n, step)


def dataloader_bound(workers: int, batch_bytes: int, prefetch_factor: int = 2) -> int:
    """Upper bound of one DataLoader iterator's /dev/shm use, in bytes.

    ``(workers x prefetch_factor + 2) x B' + (3 x workers + 8) pages``, where B' is the batch
    rounded up to whole pages plus one page for the labels tensor. Measured with torch 2.13
    over 72 configurations without an exception (docs/background.md, "How much is needed").

    Raises:
        ValueError: for a negative argument or ``prefetch_factor`` < 1.
    """
    if workers < 0 or batch_bytes < 0 or prefetch_factor < 1:
        raise ValueError("workers and batch bytes must be >= 0, prefetch_factor >= 1")
    if workers == 0:
        return 0
    pages = round_up(batch_bytes, PAGE_SIZE) // PAGE_SIZE + 1
    return (workers * prefetch_factor + 2) * pages * PAGE_SIZE + (3 * workers + 8) * PAGE_SIZE


@dataclass(frozen=True)
class Recommendation:
    """The sizes to configure and how they were derived.

    Attributes:
        shm_size: bytes of /dev/shm to configure, or None when the data cannot support one.
        shm_basis: one sentence: the figure used, the headroom and the rounding (or why none).
        headroom: the fraction added (0.25 = 25%).
        memory_limit: container memory limit in bytes, or unknown with the reason.
        memory_basis: one sentence on how the memory limit was derived.
        snippets: docker / compose / kubernetes / podman / ecs fragments for these sizes.
    """

    shm_size: int | None
    shm_basis: str
    headroom: float
    memory_limit: Fact[int]
    memory_basis: str
    snippets: tuple[Snippet, ...] = ()


def recommend(
    need: int | None,
    need_basis: str,
    *,
    headroom: float = DEFAULT_HEADROOM,
    cgroup_peak: Fact[int] | None = None,
    shm_peak: int = 0,
    non_shm_seen: int | None = None,
    floor: int | None = None,
    floor_basis: str = "",
) -> Recommendation:
    """Build a :class:`Recommendation`.

    Args:
        need: bytes of shm the job needs (measured peak or probed minimum), or None.
        need_basis: what ``need`` is, or why there is none (e.g. "the run ran out of shm").
        headroom: fraction to add, >= 0.
        cgroup_peak: the memory cgroup's peak bytes (a Fact), or None when not measured.
        shm_peak: measured shm peak bytes.
        non_shm_seen: largest ``cgroup usage - shm used`` seen at the same instant, or None.
        floor: bytes the shm size must reach whatever the headroom gives (e.g.
            :func:`dataloader_bound`), or None.
        floor_basis: what ``floor`` is, for the basis sentence.

    Raises:
        ValueError: for a negative or non-finite headroom.
    """
    if not math.isfinite(headroom) or headroom < 0:
        raise ValueError(f"headroom must be a finite number >= 0, got {headroom}")
    if need is None or need <= 0:
        basis = need_basis
        if need is not None:
            basis = (
                f"{need_basis} 0 B: the command used no /dev/shm, so any size works "
                "(the runtimes' default 64 MiB included)"
            )
        return Recommendation(
            None,
            basis,
            headroom,
            Fact.unknown("no shm size could be recommended"),
            "no shm size, so no memory limit",
        )
    with_headroom = int(need * (1 + headroom))
    shm_basis = f"{need_basis} {format_iec(need)} + {headroom:.0%} headroom = " + format_iec(
        with_headroom
    )
    if floor is not None and floor > with_headroom:
        shm_basis += f", raised to {floor_basis} {format_iec(floor)}"
        with_headroom = floor
    shm = clean_size(with_headroom)
    shm_basis += f", rounded up to {format_iec(shm)}"
    if cgroup_peak is None:
        memory: Fact[int] = Fact.unknown("memory was not measured")
        basis = "memory was not measured"
    elif cgroup_peak.value is None:
        memory = Fact.unknown(cgroup_peak.reason or "memory cgroup peak unknown")
        basis = f"no memory cgroup peak: {cgroup_peak.reason}"
    else:
        non_shm = max(cgroup_peak.value - shm_peak, non_shm_seen or 0, 0)
        margin = max(MEMORY_MARGIN_MIN, int(non_shm * MEMORY_MARGIN_FRACTION))
        mem = clean_size(non_shm + shm + margin)
        memory = Fact.known(mem)
        basis = (
            f"cgroup peak {format_iec(cgroup_peak.value)} includes the shm pages; non-shm use "
            f"{format_iec(non_shm)} + shm size {format_iec(shm)} + margin {format_iec(margin)} "
            f"(25%, at least 1 GiB) = {format_iec(non_shm + shm + margin)}, rounded up to "
            f"{format_iec(mem)}"
        )
    snippets = render_snippets(shm, memory.value)
    return Recommendation(shm, shm_basis, headroom, memory, basis, snippets)

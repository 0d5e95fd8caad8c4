"""The budget ``tune`` tunes for: given values, else this container's own limits.

CPUs: the CFS quota (``cpu.max`` / ``cpu.cfs_quota_us``) and the cpuset
(``cpuset.cpus.effective``), as :func:`shmguard.inspect.cgroup.read_cgroup` reads them, and the
CPUs this process may run on (``sched_getaffinity``); PyTorch's own check looks only at the
affinity (``torch/utils/data/dataloader.py``, ``_check_worker_number_rationality``), so a
quota-limited container gets more workers than it has CPUs. Memory: the cgroup's limit.
/dev/shm: 80% of its size, leaving room for what else the job and its libraries put there;
but a /dev/shm mounted without ``size=`` (the kernel default, half of RAM: tmpfs(5)), with
``size=0``, or of :data:`HOST_LIKE` of RAM or more is a host's, not a container's, so it is
refused: production will not have it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.measure.cgroups import available_cpus
from shmguard.torch.tuning.model import Budget
from shmguard.units import PAGE_SIZE, format_iec

#: Fraction of this container's /dev/shm used as the budget when none is given.
SHM_FRACTION = 0.8
#: A /dev/shm of at least this fraction of RAM is taken for a host's (the kernel's default is
#: half of RAM, tmpfs(5); a container's is sized for its job, Docker's default 64 MiB).
HOST_LIKE = 0.45


class BudgetError(ValueError):
    """No budget can be told; ``str(err)`` is one line saying which option to give."""


def _cpus_here(quota: float | None, cpuset: int | None) -> tuple[float, str]:
    here = float(available_cpus())
    parts = [f"{int(here)} CPU(s) this process may run on"]
    if cpuset is not None and cpuset < here:
        here = float(cpuset)
        parts.append(f"cpuset {cpuset}")
    if quota is not None and quota < here:
        here = quota
        parts.append(f"cpu.max quota {quota:g}")
    return here, ", ".join(parts)


def read_budget(
    *,
    shm: int | None = None,
    memory: int | None = None,
    cpus: float | None = None,
    local_ranks: int = 1,
    root: Path = Path("/"),
) -> Budget:
    """The budget: each given value, else this container's (see the module docstring).

    Args:
        shm: bytes of /dev/shm for the node, or None to use 80% of this container's.
        memory: bytes of memory limit for the node, or None to use this container's (none
            when it has none).
        cpus: CPUs for the node, or None to use this container's effective CPUs.
        local_ranks: ranks on the node sharing the budget (>= 1).
        root: filesystem root to read (tests use fixture trees).

    Raises:
        BudgetError: /dev/shm is the host's (unsized) and ``shm`` is not given, or cannot be
            read; or a value is out of range.
    """
    if local_ranks < 1:
        raise BudgetError(f"--local-ranks must be >= 1, got {local_ranks}")
    if cpus is not None and (not math.isfinite(cpus) or cpus <= 0):
        raise BudgetError(f"--cpus must be a number > 0, got {cpus:g}")
    # A fixture tree records statvfs beside its files (statvfs cannot be faked with files).
    recorded = root != Path("/") and (root / "statvfs.json").is_file()
    facts = inspect_host(
        root, holders=False, gpus=True, statvfs=statvfs_from_json(root) if recorded else None
    )
    sources: list[str] = []
    if shm is None:
        sizing, total = facts.shm.sizing.value, facts.shm.total.value
        ram = facts.memory.total.value
        if sizing in ("kernel-default", "unlimited") or (
            total and ram and total >= HOST_LIKE * ram
        ):
            what = "unsized" if sizing in ("kernel-default", "unlimited") else "host-sized"
            size = ""
            if total:
                size = f" ({format_iec(total)}" + (f" of {format_iec(ram)} RAM)" if ram else ")")
            raise BudgetError(
                f"/dev/shm here is {what}{size}: a host's tmpfs (about half of RAM "
                "or more), not a container's, so it says nothing of production; give --budget-shm "
                "SIZE (the production container's /dev/shm, e.g. 1g)"
            )
        if not total:
            raise BudgetError(
                f"cannot read this container's /dev/shm size ({facts.shm.total.reason}); give "
                "--budget-shm SIZE"
            )
        shm = int(total * SHM_FRACTION) // PAGE_SIZE * PAGE_SIZE
        sources.append(f"shm: {SHM_FRACTION:.0%} of this container's {format_iec(total)} /dev/shm")
    else:
        sources.append("shm: given")
    if shm < PAGE_SIZE * local_ranks:
        raise BudgetError(f"--budget-shm must leave each rank at least 4 KiB, got {shm} bytes")
    if memory is None:
        memory = facts.cgroup.memory_limit.value
        sources.append(
            f"memory: this container's limit {format_iec(memory)}"
            if memory is not None
            else "memory: no limit here and none given"
        )
    else:
        sources.append("memory: given")
    if cpus is None:
        cpus, how = _cpus_here(facts.cgroup.cpu_quota.value, facts.cgroup.cpuset.value)
        sources.append(f"cpus: {cpus:g} ({how})")
    else:
        sources.append("cpus: given")
    gpus = facts.gpus.value
    return Budget(
        shm=shm,
        memory=memory,
        cpus=cpus,
        local_ranks=local_ranks,
        sources=tuple(sources),
        gpu=bool(gpus and gpus.gpus) or os.path.exists(root / "dev/nvidiactl"),
    )

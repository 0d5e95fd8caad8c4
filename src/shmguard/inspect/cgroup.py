"""Memory and CPU limits from the process's cgroup, v1 or v2, read through an injectable root.

Sources: Documentation/admin-guide/cgroup-v2.rst (``memory.max`` ``max`` = none,
``memory.current``, ``memory.events`` keys ``oom`` and ``oom_kill``, ``memory.stat`` ``shmem``,
``cpu.max`` ``"$MAX $PERIOD"``, ``cpuset.cpus.effective``) and
Documentation/admin-guide/cgroup-v1/memory.rst (``memory.limit_in_bytes``, unlimited =
PAGE_COUNTER_MAX pages, 9223372036854771712 with 4 KiB pages; ``memory.stat``
``hierarchical_memory_limit`` is the smallest limit among ancestors; ``memory.oom_control``
``oom_kill N`` since Linux 4.13), cgroup-v1/cpusets.rst, scheduler/sched-bwc.rst
(``cpu.cfs_quota_us`` -1 = none). Which directory is the process's cgroup is found by
:func:`shmguard.inspect.cgroupfs.locate_cgroup` (/proc/<pid>/cgroup, cgroups(7), placed on the
mountinfo cgroupfs mounts); tmpfs pages are charged to the memory cgroup that first touches them
(config_formats.md 1.3).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from shmguard.inspect._read import exists, parse_int, read_text
from shmguard.inspect.cgroupfs import CgroupLocation, locate_cgroup
from shmguard.inspect.mounts import MountinfoError, parse_mountinfo
from shmguard.model import Fact
from shmguard.model.host import CgroupFacts

#: v1 values at or above this mean "no limit" (PAGE_COUNTER_MAX * page size is just below 2**63).
V1_UNLIMITED = 2**62


def parse_cpuset(text: str) -> int:
    """Number of CPUs in a cpuset list such as ``0-3,8,10-11`` (cpuset(7) "List format":
    comma-separated decimal CPU numbers and ``lo-hi`` ranges with ``lo <= hi``). An empty
    list (a cpuset with no CPUs) is 0.

    Raises:
        ValueError: for text that is not such a list (``3-1``, ``a``, ``0,,1``, binary).
    """
    body = text.strip()
    if not body:
        return 0
    count = 0
    for part in body.split(","):
        m = _CPU_RANGE.fullmatch(part)
        if m is None:
            raise ValueError(f"not a cpu list item: {part[:20]!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"range {part!r} runs backwards")
        count += hi - lo + 1
    return count


_CPU_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


class _Reader:
    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, path: str) -> Fact[str]:
        text, reason = read_text(self.root, path)
        return Fact.unknown(reason or path) if text is None else Fact.known(text)

    def integer(self, path: str, *, signed: bool = False) -> Fact[int]:
        text = self.text(path)
        if text.value is None:
            return Fact.unknown(text.reason or path)
        value, reason = parse_int(text.value, path, signed=signed)
        return Fact.unknown(reason or path) if value is None else Fact.known(value)

    def keyed(self, path: str, key: str) -> Fact[int]:
        """``key value`` lines (memory.stat, memory.events, memory.oom_control)."""
        text = self.text(path)
        if text.value is None:
            return Fact.unknown(text.reason or path)
        for line in text.value.splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                number, reason = parse_int(value, f"{path} {key}")
                return Fact.unknown(reason or path) if number is None else Fact.known(number)
        return Fact.unknown(f"{path}: no {key!r} line")


class _Memory(NamedTuple):
    dir: Fact[str]
    limit: Fact[int]
    current: Fact[int]
    shmem: Fact[int]
    swap: Fact[int]
    ooms: Fact[int]


def _unknown_memory(why: str) -> _Memory:
    u: Fact[int] = Fact.unknown(why)
    return _Memory(Fact.unknown(why), u, u, u, u, u)


def _memory_v1(reader: _Reader, d: str) -> _Memory:
    limit = reader.keyed(f"{d}/memory.stat", "hierarchical_memory_limit")
    if limit.value is None:
        limit = reader.integer(f"{d}/memory.limit_in_bytes")
    if limit.value is not None and limit.value >= V1_UNLIMITED:
        limit = Fact[int](None)
    memsw = reader.integer(f"{d}/memory.memsw.limit_in_bytes")
    swap: Fact[int]
    if memsw.value is None:
        swap = Fact.unknown(memsw.reason or "memsw unreadable")
    elif memsw.value >= V1_UNLIMITED or limit.value is None:
        swap = Fact[int](None)
    else:
        swap = Fact.known(max(memsw.value - limit.value, 0))
    return _Memory(
        Fact.known(d),
        limit,
        reader.integer(f"{d}/memory.usage_in_bytes"),
        reader.keyed(f"{d}/memory.stat", "total_shmem"),
        swap,
        reader.keyed(f"{d}/memory.oom_control", "oom_kill"),
    )


def _max_value(reader: _Reader, path: str) -> Fact[int]:
    """A v2 ``max``-or-integer file: ``max`` is a known None (no limit)."""
    text = reader.text(path)
    if text.value is None:
        return Fact.unknown(text.reason or path)
    if text.value.strip() == "max":
        return Fact[int](None)
    value, reason = parse_int(text.value, path)
    return Fact.unknown(reason or path) if value is None else Fact.known(value)


def _memory_v2(reader: _Reader, d: str, mount_point: str) -> _Memory:
    limit = _max_value(reader, f"{d}/memory.max")
    if limit.reason is not None and not exists(reader.root, f"{d}/memory.max"):
        controllers = reader.text(f"{d}/cgroup.controllers")
        if d.rstrip("/") == mount_point.rstrip("/") and controllers.value is not None:
            if "memory" not in controllers.value.split():
                return _unknown_memory(f"{d}: the cgroup2 hierarchy has no memory controller")
            # The root cgroup has no memory.max: nothing limits it.
            limit = Fact[int](None)
        else:
            return _unknown_memory(f"{limit.reason} (no memory controller for this cgroup?)")
    else:
        # Walk up: a parent's memory.max also applies (cgroup-v2.rst, "Top-down constraint").
        parent = d.rstrip("/")
        while parent.rstrip("/") != mount_point.rstrip("/") and "/" in parent:
            parent = parent.rsplit("/", 1)[0]
            up = _max_value(reader, f"{parent}/memory.max")
            if up.value is not None and (limit.value is None or up.value < limit.value):
                limit = up
    return _Memory(
        Fact.known(d),
        limit,
        reader.integer(f"{d}/memory.current"),
        reader.keyed(f"{d}/memory.stat", "shmem"),
        _max_value(reader, f"{d}/memory.swap.max"),
        reader.keyed(f"{d}/memory.events", "oom_kill"),
    )


def _cpu_max(path: str, text: str) -> Fact[float]:
    """``cpu.max``: exactly ``"$MAX $PERIOD"`` (cgroup-v2.rst), ``$MAX`` ``max`` or a positive
    integer, ``$PERIOD`` a positive integer; a known None for ``max``."""
    fields = text.split()
    bad: Fact[float] = Fact.unknown(f"{path}: not '$MAX $PERIOD': {text.strip()[:40]!r}")
    if len(fields) != 2:
        return bad
    period, _ = parse_int(fields[1], path)
    if period is None or period <= 0:
        return bad
    if fields[0] == "max":
        return Fact[float](None)
    quota, _ = parse_int(fields[0], path)
    if quota is None or quota <= 0:
        return bad
    return Fact.known(quota / period)


def _cpu(reader: _Reader, v1: dict[str, str], v2_dir: str | None) -> tuple[Fact[float], Fact[int]]:
    quota: Fact[float]
    if "cpu" in v1:
        q = reader.integer(f"{v1['cpu']}/cpu.cfs_quota_us", signed=True)
        period = reader.integer(f"{v1['cpu']}/cpu.cfs_period_us")
        if q.value is None or period.value is None:
            quota = Fact.unknown(q.reason or period.reason or "cpu quota unreadable")
        elif period.value <= 0:
            quota = Fact.unknown(f"{v1['cpu']}/cpu.cfs_period_us: not positive: {period.value}")
        elif q.value == -1:  # sched-bwc.rst: -1 = no bandwidth restriction
            quota = Fact[float](None)
        elif q.value <= 0:
            quota = Fact.unknown(
                f"{v1['cpu']}/cpu.cfs_quota_us: neither -1 nor positive: {q.value}"
            )
        else:
            quota = Fact.known(q.value / period.value)
    elif v2_dir is not None:
        text = reader.text(f"{v2_dir}/cpu.max")
        if text.value is None:
            quota = Fact.unknown(text.reason or "cpu.max unreadable")
        else:
            quota = _cpu_max(f"{v2_dir}/cpu.max", text.value)
    else:
        quota = Fact.unknown("no cpu controller for this process")
    candidates = []
    if "cpuset" in v1:
        candidates = [f"{v1['cpuset']}/cpuset.effective_cpus", f"{v1['cpuset']}/cpuset.cpus"]
    elif v2_dir is not None:
        candidates = [f"{v2_dir}/cpuset.cpus.effective"]
    cpuset: Fact[int] = Fact.unknown("no cpuset controller for this process")
    for path in candidates:
        text = reader.text(path)
        if text.value is None:
            cpuset = Fact.unknown(text.reason or path)
            continue
        try:
            cpuset = Fact.known(parse_cpuset(text.value))
            break
        except ValueError:
            cpuset = Fact.unknown(f"{path}: not a cpu list: {text.value.strip()[:40]!r}")
    return quota, cpuset


def read_cgroup(root: Path, mountinfo: str | None, proc_cgroup: str | None) -> CgroupFacts:
    """Read cgroup facts.

    Args:
        root: filesystem root holding the cgroup mounts.
        mountinfo: this side's mountinfo text (where cgroupfs is mounted), or None.
        proc_cgroup: the target's ``/proc/<pid>/cgroup`` text, or None.

    Returns:
        :class:`CgroupFacts`; unknown facts carry the reason. The memory controller's
        hierarchy decides ``version``: on a hybrid host it is v1 unless only cgroup2 has it.
    """
    if mountinfo is None or proc_cgroup is None:
        why = "mountinfo unreadable" if mountinfo is None else "/proc/<pid>/cgroup unreadable"
        return _result(Fact.unknown(why), "none", _unknown_memory(why), Fact.unknown(why),
                       Fact.unknown(why), ())  # fmt: skip
    try:
        mounts = parse_mountinfo(mountinfo)
    except MountinfoError as err:
        why = f"mountinfo: {err}"
        return _result(Fact.unknown(why), "none", _unknown_memory(why), Fact.unknown(why),
                       Fact.unknown(why), ())  # fmt: skip
    v1_mounts = [m for m in mounts if m.fstype == "cgroup"]
    v2_mounts = [m for m in mounts if m.fstype == "cgroup2"]
    mode = {(True, True): "hybrid", (True, False): "v1", (False, True): "v2"}.get(
        (bool(v1_mounts), bool(v2_mounts)), "none"
    )
    notes: list[str] = []
    v1_dirs: dict[str, str] = {}
    for controller in ("memory", "cpu", "cpuset"):
        found = locate_cgroup(root, mountinfo, proc_cgroup, controller).value
        if found is not None:
            v1_dirs[controller] = found.dir
            notes += [found.note] if found.note else []
    v2: CgroupLocation | None = locate_cgroup(root, mountinfo, proc_cgroup).value
    if v2 is not None and v2.note:
        notes.append(v2.note)
    v2_dir = v2.dir if v2 is not None else None
    reader = _Reader(root)
    version: Fact[int]
    if "memory" in v1_dirs:
        memory = _memory_v1(reader, v1_dirs["memory"])
        version = Fact.known(1)
        if v2 is not None:
            ctl = reader.text(f"{v2.mount.mount_point}/cgroup.controllers")
            if ctl.value is not None and "memory" not in ctl.value.split():
                notes.append(
                    f"the cgroup2 mount at {v2.mount.mount_point} has no memory "
                    "controller; memory figures come from cgroup v1"
                )
    elif v2 is not None:
        memory = _memory_v2(reader, v2.dir, v2.mount.mount_point)
        version = Fact.known(2) if memory.dir.value else Fact.unknown(memory.dir.reason or "")
    else:
        why = "no cgroup mount holds a memory controller for this process"
        memory, version = _unknown_memory(why), Fact.unknown(why)
    quota, cpuset = _cpu(reader, v1_dirs, v2_dir)
    # Notes come per hierarchy: memory and cpu outside the same mount root are said once.
    return _result(version, mode, memory, quota, cpuset, tuple(dict.fromkeys(notes)))


def _result(
    version: Fact[int],
    mode: str,
    memory: _Memory,
    quota: Fact[float],
    cpuset: Fact[int],
    notes: tuple[str, ...],
) -> CgroupFacts:
    return CgroupFacts(
        version=version,
        mode=mode,
        memory_dir=memory.dir,
        memory_limit=memory.limit,
        memory_current=memory.current,
        shmem=memory.shmem,
        swap_limit=memory.swap,
        oom_kills=memory.ooms,
        cpu_quota=quota,
        cpuset=cpuset,
        notes=notes,
    )

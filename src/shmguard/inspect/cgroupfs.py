"""Where a process's cgroup is: its /proc/<pid>/cgroup memberships placed on the cgroupfs mounts.

The one cgroup discovery: ``doctor`` (:func:`shmguard.inspect.cgroup.read_cgroup`) and the
sandbox (:func:`shmguard.measure.cgroups.plan_cgroups`) both ask it.

Sources:

* cgroups(7) "/proc/[pid]/cgroup": one line per hierarchy, ``hierarchy-ID:controller-list:path``;
  the v2 line is ``0::path``; the path is relative to the hierarchy's root, or to the reader's
  cgroup namespace root (``/../x`` lies above it). The kernel writes the path as it is, with no
  escaping (kernel/cgroup/cgroup.c ``proc_cgroup_show``: ``seq_puts``).
* proc(5) "/proc/[pid]/mountinfo" field 4 (root): for cgroupfs the cgroup shown at the mount
  point, relative to the reader's cgroup namespace (kernel/cgroup/cgroup.c ``cgroup_show_path``);
  it and field 5 (mount point, fs/proc_namespace.c ``show_mountinfo``) escape space, tab,
  newline and backslash as octal (``\\040``), which :func:`~shmguard.inspect.mounts.
  parse_mountinfo` undoes.
* Documentation/admin-guide/cgroup-v1/cgroups.rst: a v1 hierarchy is mounted with the names of
  its controllers as options (``mount -t cgroup -o cpu,cpuacct``), shown in mountinfo field 11.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shmguard.inspect._read import under
from shmguard.inspect.mounts import Mount, MountinfoError, parse_mountinfo
from shmguard.model import Fact


@dataclass(frozen=True)
class Membership:
    """One /proc/<pid>/cgroup line.

    Attributes:
        hierarchy: the hierarchy ID as written (``"0"`` for cgroup v2).
        controllers: the controllers bound to it (``("cpu", "cpuacct")``, ``("name=systemd",)``),
            empty for v2.
        path: the cgroup's path in that hierarchy, unescaped as the kernel writes it.
    """

    hierarchy: str
    controllers: tuple[str, ...]
    path: str


def parse_proc_cgroup(text: str) -> tuple[Membership, ...]:
    """Parse /proc/<pid>/cgroup text into memberships, in file order; lines without two colons
    are skipped (the path itself may hold colons, so only the first two split)."""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append(Membership(parts[0], tuple(c for c in parts[1].split(",") if c), parts[2]))
    return tuple(out)


@dataclass(frozen=True)
class CgroupLocation:
    """The cgroup directory of a process in one hierarchy.

    Attributes:
        version: 1 or 2.
        controller: the v1 controller asked for (``memory``), or ``""`` for the v2 hierarchy.
        mount: the cgroupfs mount the directory was placed on.
        cgroup: the process's cgroup path in the hierarchy (/proc/<pid>/cgroup field 3).
        dir: the directory, absolute, as the inspected system names it
            (``/sys/fs/cgroup/memory/ctr``).
        path: the same directory below the injectable root (what to open or create in).
        note: None when ``cgroup`` lies inside the mount's root; otherwise why ``dir`` is only
            the mount point, the closest directory the mount shows (a cgroup outside the
            mounted subtree, such as ``/../x`` from another cgroup namespace).
    """

    version: int
    controller: str
    mount: Mount
    cgroup: str
    dir: str
    path: Path
    note: str | None = None


def _relative(root: str, cgroup: str) -> str | None:
    """``cgroup`` relative to the mount root ``root`` (``""`` when equal), or None when it is
    not inside it. Compared a path component at a time: ``/kubepods/pod1`` holds
    ``/kubepods/pod1/x`` but not ``/kubepods/pod12/x``; a ``..`` left over lies above the root."""
    base = [p for p in root.split("/") if p]
    parts = [p for p in cgroup.split("/") if p]
    if parts[: len(base)] != base or ".." in parts[len(base) :]:
        return None
    return "/".join(parts[len(base) :])


def locate_cgroup(
    root: Path, mountinfo: str, proc_cgroup: str, controller: str | None = None
) -> Fact[CgroupLocation]:
    """The directory of the cgroup a process is in, for a v1 controller or the v2 hierarchy.

    Args:
        root: filesystem root the mounts are seen under (``/`` on a live system).
        mountinfo: mountinfo text of the side that reads the cgroup files (where cgroupfs is
            mounted).
        proc_cgroup: the process's ``/proc/<pid>/cgroup`` text.
        controller: a v1 controller name (``memory``, ``cpu``, ``cpuset``) for the v1 hierarchy
            that carries it, or None for the v2 (unified) hierarchy.

    Returns:
        a known :class:`CgroupLocation`, or unknown with a one-line reason (mountinfo malformed,
        no such mount, no such line). Among several mounts of the hierarchy, the last one
        (later lines are mounted on top) whose root holds the cgroup; when none does, the last
        one, with a ``note``. Never raises.
    """
    want = "cgroup v2" if controller is None else f"cgroup v1 {controller}"
    try:
        mounts = parse_mountinfo(mountinfo)
    except MountinfoError as err:
        return Fact.unknown(f"no {want} hierarchy: mountinfo: {err}")
    if controller is None:
        candidates = [m for m in mounts if m.fstype == "cgroup2"]
        member = next(
            (m for m in parse_proc_cgroup(proc_cgroup) if m.hierarchy == "0" and not m.controllers),
            None,
        )
        missing_mount, missing_line = "no cgroup2 mount", "no '0::' line in /proc/<pid>/cgroup"
    else:
        candidates = [m for m in mounts if m.fstype == "cgroup" and controller in m.super_options]
        member = next(
            (m for m in parse_proc_cgroup(proc_cgroup) if controller in m.controllers), None
        )
        missing_mount = f"no cgroup mount with the {controller} controller"
        missing_line = f"no {controller} line in /proc/<pid>/cgroup"
    if not candidates or member is None:
        return Fact.unknown(
            f"no {want} hierarchy: {missing_mount if not candidates else missing_line}"
        )
    inside = [(m, rel) for m in candidates if (rel := _relative(m.root, member.path)) is not None]
    note = None
    if inside:
        mount, rel = inside[-1]
    else:
        mount, rel = candidates[-1], ""
        note = f"cgroup path {member.path} is outside mount root {mount.root}"
    point = mount.mount_point.rstrip("/")
    path = f"{point}/{rel}" if rel else point or "/"
    return Fact.known(
        CgroupLocation(
            version=1 if controller is not None else 2,
            controller=controller or "",
            mount=mount,
            cgroup=member.path,
            dir=path,
            path=under(root, path),
            note=note,
        )
    )

"""/dev/shm facts: mount, filesystem type, size option, statvfs figures, leftovers.

statvfs cannot be faked by a fixture tree, so it is a function passed in: :func:`os.statvfs` on
the real path for live use, :func:`statvfs_from_json` for a fixture tree that records what a
real run read (``statvfs.json`` at the tree's root).

Sources: tmpfs(5) (``size=`` rounded up to pages; no ``size=`` means half of RAM; ``size=0``
means unlimited; the kernel's ``shmem_show_options`` omits ``size=`` when it equals that
default), ../shared/research/config_formats.md (runtime defaults), torch_shm.md section 1.2
(zero-block ``torch_*`` files are left by failed allocations).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from shmguard.inspect._read import read_text
from shmguard.inspect.mounts import MountinfoError, mount_for, parse_mountinfo
from shmguard.model import Fact
from shmguard.model.host import LeftoverFile, ShmFacts
from shmguard.units import DOCKER_DEFAULT_SHM, PODMAN_DEFAULT_SHM, SizeError, parse_tmpfs_size

#: Which runtimes give /dev/shm exactly this many bytes by default (config_formats.md 1.1,
#: 4.1, 5): Docker ``config.DefaultShmSize``, containerd CRI ``defaultShmSize``, CRI-O
#: ``DefaultShmSize`` are 64 MiB; Podman's containers.conf ``65536k`` is decimal: 65,536,000.
RUNTIME_DEFAULTS: dict[int, tuple[str, ...]] = {
    DOCKER_DEFAULT_SHM: ("docker", "containerd", "cri-o"),
    PODMAN_DEFAULT_SHM: ("podman",),
}


class StatvfsLike(Protocol):
    """The fields of :func:`os.statvfs` that we use (bytes = blocks * ``f_frsize``)."""

    @property
    def f_frsize(self) -> int: ...
    @property
    def f_blocks(self) -> int: ...
    @property
    def f_bfree(self) -> int: ...
    @property
    def f_bavail(self) -> int: ...


StatvfsFn = Callable[[str], StatvfsLike]


@dataclass(frozen=True)
class RecordedStatvfs:
    """statvfs figures recorded in a fixture tree."""

    f_frsize: int
    f_blocks: int
    f_bfree: int
    f_bavail: int


def statvfs_from_json(root: Path) -> StatvfsFn:
    """A statvfs function answering from ``root/statvfs.json``.

    The file maps a path as the target system names it to the four fields, e.g.
    ``{"/dev/shm": {"f_frsize": 4096, "f_blocks": 16384, "f_bfree": 16128, "f_bavail": 16128}}``.
    A path not in the file raises ``FileNotFoundError`` as statvfs would.

    Raises:
        ValueError: ``<file>: ...`` when the file is not that shape.
    """
    file = root / "statvfs.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object of paths")
        table = {str(k): _recorded(str(k), v) for k, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{file}: not a statvfs record ({err})") from None

    def _statvfs(path: str) -> StatvfsLike:
        rel = "/" + os.path.relpath(path, root).lstrip("./")
        if rel not in table:
            raise FileNotFoundError(2, "No such file or directory", path)
        return table[rel]

    return _statvfs


def _recorded(path: str, entry: object) -> RecordedStatvfs:
    """One ``statvfs.json`` entry, checked as statvfs(3) guarantees: non-negative integers,
    ``f_frsize`` > 0 and ``f_bavail <= f_bfree <= f_blocks``."""
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: not an object")
    fields = []
    for name in ("f_frsize", "f_blocks", "f_bfree", "f_bavail"):
        value = entry.get(name)
        if type(value) is not int or value < 0:
            raise ValueError(f"{path}: {name} is not a non-negative integer: {value!r}")
        fields.append(value)
    frsize, blocks, bfree, bavail = fields
    if frsize == 0 or not bavail <= bfree <= blocks:
        raise ValueError(f"{path}: needs f_frsize > 0 and f_bavail <= f_bfree <= f_blocks")
    return RecordedStatvfs(frsize, blocks, bfree, bavail)


def read_shm(
    fs_path: Path,
    mountinfo: tuple[str | None, str | None],
    *,
    target_path: str = "/dev/shm",
    statvfs: StatvfsFn | None = None,
    mem_total: int | None = None,
    within: Path | None = None,
    real_path: str | None = None,
) -> ShmFacts:
    """Read /dev/shm facts.

    Args:
        fs_path: where the directory is reachable from here (``/dev/shm``,
            ``/proc/<pid>/root/dev/shm`` or inside a fixture tree).
        mountinfo: ``(text, None)`` or ``(None, reason)``: the target's
            ``/proc/<pid>/mountinfo``, as :func:`shmguard.inspect._read.read_text` returns it.
        target_path: the path as the target names it, looked up in mountinfo.
        statvfs: default :func:`os.statvfs`.
        mem_total: RAM bytes, to resolve ``size=N%``.
        within: the target's root (``/proc/<pid>/root``). When /dev/shm is not found and this
            root itself cannot be reached (the process exited, or is a zombie), existence is
            unknown: a missing root says nothing about the container's /dev/shm.
        real_path: ``target_path`` after symlinks, as the target resolves it (default
            ``target_path``); ``fs_path`` must already point at it.

    Returns:
        :class:`ShmFacts`; anything unreadable is an unknown Fact with its reason.
    """
    statvfs = statvfs or os.statvfs
    real = real_path or target_path
    try:
        exists: Fact[bool] = Fact.known(stat.S_ISDIR(os.stat(fs_path).st_mode))
        why = f"{target_path}: no such directory"
    except (FileNotFoundError, NotADirectoryError):
        exists, why = Fact.known(False), f"{target_path}: no such directory"
        if within is not None:
            try:
                os.stat(within)
            except OSError as err:
                why = f"{within}: {(err.strerror or str(err)).lower()} (has the process exited?)"
                exists = Fact.unknown(why)
    except OSError as err:
        why = f"{fs_path}: {(err.strerror or str(err)).lower()}"
        exists = Fact.unknown(why)
    if not exists.value:
        return ShmFacts(
            target_path, real, exists,
            *(Fact.unknown(why),) * 6,
            total=Fact.unknown(why), used=Fact.unknown(why), free=Fact.unknown(why),
            default_of=Fact.unknown(why), named_files=Fact.unknown(why),
            named_bytes=Fact.unknown(why), leftovers=Fact.unknown(why),
            device=Fact.unknown(why),
        )  # fmt: skip
    mount = _mount_facts(mountinfo, real, mem_total)
    total, used, free = _statvfs_facts(statvfs, fs_path, target_path, mount[1], mount[5])
    if total.value is not None:
        default_of: Fact[tuple[str, ...]] = Fact.known(RUNTIME_DEFAULTS.get(total.value, ()))
    else:
        default_of = Fact.unknown(total.reason or "size unknown")
    named_files, named_bytes, leftovers = _scan_dir(fs_path, target_path)
    try:
        device: Fact[int] = Fact.known(os.stat(fs_path).st_dev)
    except OSError as err:
        device = Fact.unknown(f"{target_path}: {(err.strerror or str(err)).lower()}")
    return ShmFacts(
        target_path, real, exists, *mount, total, used, free, default_of,
        named_files, named_bytes, leftovers, device,
    )  # fmt: skip


def read_own_shm(fs_path: Path) -> ShmFacts:
    """:func:`read_shm` of ``fs_path`` as this process sees it (its own
    ``/proc/self/mountinfo``): what ``shmguard plan`` compares a loader with."""
    return read_shm(fs_path, read_text(Path("/"), "proc/self/mountinfo"))


def _mount_facts(
    mountinfo: tuple[str | None, str | None], target: str, mem_total: int | None
) -> tuple[Fact[str], Fact[str], Fact[str], Fact[tuple[str, ...]], Fact[int], Fact[str]]:
    text, reason = mountinfo
    if text is None:
        why = reason or "mountinfo unreadable"
        return (Fact.unknown(why), Fact.unknown(why), Fact.unknown(why), Fact.unknown(why),
                Fact.unknown(why), Fact.unknown(why))  # fmt: skip
    try:
        mount = mount_for(parse_mountinfo(text), target)
    except MountinfoError as err:
        why = f"mountinfo: {err}"
        return (Fact.unknown(why), Fact.unknown(why), Fact.unknown(why), Fact.unknown(why),
                Fact.unknown(why), Fact.unknown(why))  # fmt: skip
    if mount is None:
        why = f"no mount in mountinfo contains {target}"
        return (Fact.unknown(why), Fact.unknown(why), Fact.unknown(why), Fact.unknown(why),
                Fact.unknown(why), Fact.unknown(why))  # fmt: skip
    size_text = mount.option("size")
    size: Fact[int]
    if mount.fstype != "tmpfs":
        size = Fact[int](None) if size_text is None else _size(size_text, mem_total)
        sizing: Fact[str] = Fact.known("not-tmpfs")
    elif size_text is None:
        size, sizing = Fact[int](None), Fact.known("kernel-default")
    else:
        size = _size(size_text, mem_total)
        sizing = Fact.known("unlimited" if size.value == 0 else "size-option")
    return (
        Fact.known(mount.mount_point),
        Fact.known(mount.fstype),
        Fact.known(mount.source),
        Fact.known(mount.super_options),
        size,
        sizing,
    )


def _size(text: str, mem_total: int | None) -> Fact[int]:
    try:
        return Fact.known(parse_tmpfs_size(text, mem_total))
    except SizeError as err:
        return Fact.unknown(f"mountinfo size={text}: {err}")


def _statvfs_facts(
    statvfs: StatvfsFn, fs_path: Path, target: str, fstype: Fact[str], sizing: Fact[str]
) -> tuple[Fact[int], Fact[int], Fact[int]]:
    try:
        st = statvfs(str(fs_path))
    except OSError as err:
        why = f"statvfs({target}): {(err.strerror or str(err)).lower()}"
        return Fact.unknown(why), Fact.unknown(why), Fact.unknown(why)
    if st.f_blocks == 0:
        # ramfs and an unlimited tmpfs answer statvfs with zeros: there is no size to read.
        if sizing.value == "unlimited":
            what = "a tmpfs with size=0 has no size limit and keeps no block count"
        elif fstype.value is not None:
            what = f"{fstype.value} keeps no block count (no size limit)"
        else:
            what = "the filesystem keeps no block count"
        why = f"statvfs({target}) reports 0 blocks: {what}"
        return Fact.unknown(why), Fact.unknown(why), Fact.unknown(why)
    size = st.f_frsize
    return (
        Fact.known(st.f_blocks * size),
        Fact.known((st.f_blocks - st.f_bfree) * size),
        Fact.known(st.f_bavail * size),
    )


def _scan_dir(
    fs_path: Path, target: str
) -> tuple[Fact[int], Fact[int], Fact[tuple[LeftoverFile, ...]]]:
    count = total = 0
    leftovers = []
    try:
        with os.scandir(fs_path) as it:
            for entry in it:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed while we listed
                count += 1
                total += st.st_blocks * 512
                if entry.name.startswith("torch_") and st.st_blocks == 0 and st.st_size > 0:
                    leftovers.append(LeftoverFile(entry.name, st.st_size))
    except OSError as err:
        why = f"{target}: {(err.strerror or str(err)).lower()}"
        return Fact.unknown(why), Fact.unknown(why), Fact.unknown(why)
    leftovers.sort(key=lambda f: f.name)
    return Fact.known(count), Fact.known(total), Fact.known(tuple(leftovers))

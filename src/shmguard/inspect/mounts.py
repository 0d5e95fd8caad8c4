"""/proc/<pid>/mountinfo: the mount holding a path, its filesystem type and options.

Format: proc(5), "/proc/pid/mountinfo" (Documentation/filesystems/proc.rst 3.5)::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2)(3)   (4)   (5)      (6)     (7)   (8) (9)   (10)         (11)

Fields 7 are zero or more optional fields ended by ``-``. Paths escape space, tab, newline and
backslash as octal (``\\040``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OCTAL = re.compile(r"\\([0-7]{3})")
_DEVICE = re.compile(r"[0-9]+:[0-9]+")


def _unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    """One mountinfo line. ``options`` are per-mount (``rw,nosuid``), ``super_options`` are
    the filesystem's (``rw,size=65536k``); ``root`` is the path inside the filesystem that is
    mounted (``/`` unless a bind of a subdirectory); ``device`` is ``major:minor``."""

    mount_id: int
    parent_id: int
    device: str
    root: str
    mount_point: str
    options: tuple[str, ...]
    fstype: str
    source: str
    super_options: tuple[str, ...]

    def option(self, key: str) -> str | None:
        """The value of ``key=value`` in the super options (last one wins), else None."""
        found = None
        for opt in self.super_options:
            name, sep, value = opt.partition("=")
            if sep and name == key:
                found = value
        return found


class MountinfoError(ValueError):
    """A mountinfo line that does not follow proc(5); the message names the line number."""


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """Parse mountinfo text into mounts, in file order (later lines are mounted on top).

    The kernel ends every line with a newline (fs/proc_namespace.c ``show_mountinfo``), so
    text whose last line has none was cut short (a partial copy, a truncated snapshot) and is
    refused rather than read as a mount with clipped options.

    Raises:
        MountinfoError: ``line N: ...`` for a malformed or truncated line.
    """
    mounts = []
    lines = text.split("\n")
    if lines[-1]:
        raise MountinfoError(f"line {len(lines)}: truncated (no end of line)")
    for lineno, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
            if len(fields) != sep + 4 or not _DEVICE.fullmatch(fields[2]):
                raise ValueError(line)
            mounts.append(
                Mount(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    device=fields[2],
                    root=_unescape(fields[3]),
                    mount_point=_unescape(fields[4]),
                    options=tuple(fields[5].split(",")),
                    fstype=fields[sep + 1],
                    source=_unescape(fields[sep + 2]),
                    super_options=tuple(fields[sep + 3].split(",")),
                )
            )
        except (ValueError, IndexError):
            raise MountinfoError(f"line {lineno}: not in proc(5) mountinfo format") from None
    return tuple(mounts)


def mount_for(mounts: tuple[Mount, ...], path: str) -> Mount | None:
    """The mount that ``path`` (absolute, symlinks already resolved) lives on, as the kernel's
    path walk finds it.

    Starting from the topmost ``/`` mount, at ``/`` and at each ancestor of ``path`` (then
    ``path`` itself) it steps onto the last mount stacked on that point *on top of the mount
    reached so far* (a mount's parent is the mount holding its mount point, proc(5) fields 1
    and 2). A mount whose parent was itself covered by a later mount (``/dev/shm`` under a
    fresh ``/dev``) is hidden, and is not chosen. Without any ``/`` mount (a partial table)
    the longest matching mount point wins.
    """
    roots = [m for m in mounts if m.mount_point == "/"]
    if not roots:
        return _longest_prefix(mounts, path)
    stacked_on = {m.parent_id for m in roots}
    current = next((m for m in reversed(roots) if m.mount_id not in stacked_on), roots[-1])
    current = _top(mounts, "/", current)
    point = ""
    for part in [p for p in path.split("/") if p]:
        point += "/" + part
        current = _top(mounts, point, current)
    return current


def _top(mounts: tuple[Mount, ...], point: str, below: Mount) -> Mount:
    """The last mount on ``point`` stacked on ``below``, repeatedly (stacked mounts). A cycle
    of parent ids (only in a corrupt table) stops the climb."""
    seen = {below.mount_id}
    while True:
        above = [m for m in mounts if m.mount_point == point and m.parent_id == below.mount_id]
        if not above or above[-1].mount_id in seen:
            return below
        below = above[-1]
        seen.add(below.mount_id)


def _longest_prefix(mounts: tuple[Mount, ...], path: str) -> Mount | None:
    best: Mount | None = None
    best_len = -1
    for m in mounts:
        point = m.mount_point.rstrip("/") or "/"
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best, best_len = m, len(point)
    return best

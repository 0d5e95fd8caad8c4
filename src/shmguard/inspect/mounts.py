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

    Raises:
        MountinfoError: ``line N: ...`` for a malformed line.
    """
    mounts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
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
    """The mount that ``path`` lives on: the longest mount point that is ``path`` or one of its
    ancestors; among stacked mounts on the same point, the last (topmost) one."""
    best: Mount | None = None
    best_len = -1
    for m in mounts:
        point = m.mount_point.rstrip("/") or "/"
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best, best_len = m, len(point)
    return best

"""Reading files under an injectable root: text or a one-line reason, never an exception."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: What the kernel writes for a decimal integer: ASCII digits, an optional minus sign. Python's
#: int() also takes "1_000", "+5", " ٣" and other Unicode digits, which no kernel file holds.
_DECIMAL = re.compile(r"-?[0-9]+")


def under(root: Path, path: str) -> Path:
    """``path`` (absolute, as the target system names it) below ``root``."""
    return root / path.lstrip("/")


def read_text(root: Path, path: str) -> tuple[str | None, str | None]:
    """Read ``root/path`` as text.

    Returns:
        ``(text, None)`` or ``(None, reason)`` where reason names the file as the target system
        names it and the OS error, e.g. ``"/proc/self/limits: permission denied"``.
    """
    try:
        return under(root, path).read_text(encoding="utf-8", errors="replace"), None
    except OSError as err:
        return None, f"{path}: {(err.strerror or str(err)).lower()}"


def exists(root: Path, path: str) -> bool:
    """Whether ``root/path`` exists (a dangling link counts as present)."""
    return os.path.lexists(under(root, path))


def parse_int(text: str, what: str, *, signed: bool = False) -> tuple[int | None, str | None]:
    """The decimal integer in ``text`` (surrounding whitespace ignored), or a reason naming
    ``what`` (the file) and the bad text.

    Only ASCII digits are accepted, as the kernel writes them; a negative number only with
    ``signed`` (``cpu.cfs_quota_us`` -1), since byte and event counts are never negative.
    """
    value = text.strip()
    if not _DECIMAL.fullmatch(value):
        return None, f"{what}: not an integer: {value[:40]!r}"
    if value.startswith("-") and not signed:
        return None, f"{what}: negative: {value[:40]!r}"
    return int(value), None


def resolve(root: Path, path: str, max_links: int = 40) -> str:
    """``path`` with every symlink resolved the way the target sees it: absolute link targets
    are taken from ``root`` (the target's ``/``), not from ours, as the kernel does for a
    process whose root is ``root``. ``/dev/shm -> /run/shm`` gives ``/run/shm``.

    Components that do not exist or cannot be read are kept as they are; more than
    ``max_links`` links (a loop, path_resolution(7) allows 40) stop the resolution there.
    """
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        here = "/" + "/".join([*done, part])
        try:
            target = os.readlink(under(root, here))
        except OSError:  # not a link, missing or unreadable: keep the name
            done.append(part)
            continue
        links += 1
        if links > max_links:
            return "/" + "/".join([*done, part, *parts])
        if target.startswith("/"):
            done = []
        parts = [p for p in target.split("/") if p] + parts
    return "/" + "/".join(done)

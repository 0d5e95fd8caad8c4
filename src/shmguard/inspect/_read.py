"""Reading files under an injectable root: text or a one-line reason, never an exception."""

from __future__ import annotations

import os
from pathlib import Path


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


def parse_int(text: str, what: str) -> tuple[int | None, str | None]:
    """``int(text)`` or a reason naming ``what`` (the file) and the bad text."""
    try:
        return int(text.strip()), None
    except ValueError:
        return None, f"{what}: not an integer: {text.strip()[:40]!r}"

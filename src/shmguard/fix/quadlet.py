"""The edit that sizes /dev/shm in a Podman Quadlet unit
(:class:`~shmguard.sources.quadlet.QuadletUnit`): ``ShmSize=<size>`` where the targeted Podman
has the key, else ``PodmanArgs=--shm-size=<size>`` (:func:`~shmguard.sources.quadlet.shm_key`),
as a line of its own right after the ``Image=`` line (else the section header), in the file's
line ending."""

from __future__ import annotations

from shmguard.model.finding import Edit
from shmguard.sources.quadlet import QuadletUnit, shm_key


def shm_line(q: QuadletUnit, size: str, podman: str) -> str:
    """The line a fix writes for a ``size`` (Podman syntax, ``1g``) /dev/shm."""
    if shm_key(q.kind, podman) == "ShmSize":
        return f"ShmSize={size}"
    return f"PodmanArgs=--shm-size={size}"


def add_shm_size(q: QuadletUnit, size: str, podman: str) -> Edit | None:
    """The edit adding :func:`shm_line` to ``q``'s section; None without one."""
    src = q.src
    data = src.data
    nl = data.find(b"\n")
    eol = "\r\n" if nl > 0 and data[nl - 1 : nl] == b"\r" else "\n"
    image = q.last("Image")
    if image is not None:
        at = src.byte_offset(image.value_end)
    elif q.header_end is not None:
        at = src.byte_offset(q.header_end) - 1
    else:
        return None
    end = data.find(b"\n", at)
    line = shm_line(q, size, podman)
    if end < 0:
        return Edit(len(data), len(data), eol + line)
    return Edit(end + 1, end + 1, line + eol)

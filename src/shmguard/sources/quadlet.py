"""Podman Quadlet units (``.container``, ``.pod``, ``.kube``; podman-systemd.unit(5)).

A ``.container`` unit's ``[Container]`` section is the ``podman run`` Quadlet generates, read
as a :class:`~shmguard.sources.runline.RunLine`: ``Image=`` the image, ``Exec=`` its command,
``ShmSize=`` as ``--shm-size``, ``PodmanArgs=`` as the words it holds, ``AddDevice=`` as
``--device``, ``Environment=`` as ``--env``, ``Volume=``/``Mount=``/``Tmpfs=`` as
``--volume``/``--mount``/``--tmpfs``, and ``Pod=`` as ``--ipc=container:`` (a container in a
pod has the pod's /dev/shm: its own ShmSize is not used, podman issue #22915). Each value keeps
its place in the file, so a fix rewrites it there.

``ShmSize=`` exists in ``[Container]`` since Podman 4.7 (podman PR #19230, "Podman quadlet now
supports ShmSize option in unit files"; podlet's v4.7.0 key list) and in ``[Pod]`` since 5.4
(PR #24899, merged 2024-12-24, after 5.3); before that ``PodmanArgs=--shm-size=...`` is the
way (the key exists for options Quadlet has none for). The ``--target podman=X.Y`` decides
which key a fix writes (:func:`shm_key`). A ``.kube`` unit's ``Yaml=`` files are Kubernetes
manifests, checked as such (:func:`kube_paths`). Unit syntax (systemd.syntax(7)): ``[Section]``
headers, ``Key=Value`` lines, ``#``/``;`` comments, a trailing backslash continues a line; a
key given twice takes its last value (``PodmanArgs=`` adds up).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from shmguard.sources.runline import RunLine, parse_run
from shmguard.sources.shell import Word, split_commands
from shmguard.sources.text import SourceText

SUFFIXES = (".container", ".pod", ".kube")
_SECTION = re.compile(r"^[ \t]*\[([^\]\n]+)\][ \t]*$", re.M)
_KEY = re.compile(r"^[ \t]*([A-Za-z][A-Za-z0-9]*)[ \t]*=[ \t]*", re.M)
#: Keys read as flags (one word each, value as given).
_FLAGS = {
    "ShmSize": "--shm-size",
    "AddDevice": "--device",
    "Environment": "--env",
    "Volume": "--volume",
    "Mount": "--mount",
    "Tmpfs": "--tmpfs",
    "Memory": "--memory",
    "Label": "--label",
}


def is_quadlet(path: str) -> bool:
    """Whether ``path`` is named as a Quadlet unit."""
    return path.lower().endswith(SUFFIXES)


@dataclass(frozen=True)
class Entry:
    """One ``Key=Value`` of a section: character spans of the line and the value."""

    key: str
    value: str
    line_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class QuadletUnit:
    """A Quadlet unit file.

    Attributes:
        kind: ``container``, ``pod`` or ``kube`` (the file's suffix).
        section: the entries of its ``[Container]`` / ``[Pod]`` / ``[Kube]`` section, in order.
        header_end: character index just past that section's header line (None: no section).
        run: a ``.container`` unit's ``podman run`` (None without ``Image=``).
    """

    src: SourceText
    kind: str
    section: tuple[Entry, ...]
    header_end: int | None
    run: RunLine | None

    def last(self, key: str) -> Entry | None:
        """The last ``key`` entry (the one that takes effect), or None."""
        found = [e for e in self.section if e.key == key]
        return found[-1] if found else None


def _entries(text: str, name: str) -> tuple[tuple[Entry, ...], int | None]:
    heads = list(_SECTION.finditer(text))
    for i, h in enumerate(heads):
        if h.group(1).strip() != name:
            continue
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out = []
        pos = h.end()
        while pos < end:
            nl = text.find("\n", pos)
            stop = end if nl < 0 or nl > end else nl
            # a trailing backslash continues the line
            while text[pos:stop].rstrip("\r").endswith("\\") and stop < end:
                nxt = text.find("\n", stop + 1)
                stop = end if nxt < 0 or nxt > end else nxt
            m = _KEY.match(text, pos, stop)
            if m is not None and not text[pos:stop].lstrip().startswith(("#", ";")):
                ve = len(text[:stop].rstrip("\r \t"))
                value = re.sub(r"\\\r?\n[ \t]*", " ", text[m.end() : ve])
                out.append(Entry(m.group(1), value, pos, m.end(), max(ve, m.end())))
            pos = stop + 1
        return tuple(out), text.find("\n", h.start()) + 1 or len(text)
    return (), None


def _run(src: SourceText, entries: tuple[Entry, ...]) -> RunLine | None:
    image = next((e for e in reversed(entries) if e.key == "Image" and e.value), None)
    if image is None:
        return None
    text = src.text
    head = image.line_start
    words = [Word("podman", head, head, ""), Word("run", head, head, "")]
    for e in entries:
        if e.key in _FLAGS and e.value:
            raw = text[e.value_start : e.value_end]
            words += [
                Word(_FLAGS[e.key], e.line_start, e.line_start, ""),
                Word(e.value, e.value_start, e.value_end, raw),
            ]
        elif e.key == "PodmanArgs":
            words += [w for cmd in split_commands(text, e.value_start, e.value_end) for w in cmd]
        elif e.key == "Pod" and e.value:
            words.append(Word(f"--ipc=container:{e.value}", e.line_start, e.line_start, ""))
    # "--" ends the flags: the image is known, never the value of an unknown flag before it
    words.append(Word("--", image.line_start, image.line_start, ""))
    words.append(Word(image.value, image.value_start, image.value_end, image.value))
    exec_ = next((e for e in reversed(entries) if e.key == "Exec"), None)
    if exec_ is not None:
        words += [
            w for cmd in split_commands(text, exec_.value_start, exec_.value_end) for w in cmd
        ]
    return parse_run(words, src.byte_offset, src.file, src.line_col, text)


def load_quadlet(src: SourceText) -> QuadletUnit:
    """The Quadlet unit ``src`` is (by its suffix)."""
    kind = os.path.splitext(src.file)[1].lower().lstrip(".")
    entries, header_end = _entries(src.text, kind.capitalize())
    run = _run(src, entries) if kind == "container" else None
    return QuadletUnit(src, kind, entries, header_end, run)


def shm_key(kind: str, podman: str) -> str:
    """The key a fix writes for /dev/shm in a ``kind`` unit under Podman ``podman``
    (``major.minor``): ``ShmSize`` where it exists (``.container`` 4.7+, ``.pod`` 5.4+), else
    ``PodmanArgs`` (with ``--shm-size=``)."""
    try:
        version = tuple(int(p) for p in podman.split(".")[:2])
    except ValueError:
        return "PodmanArgs"
    need = (4, 7) if kind == "container" else (5, 4)
    return "ShmSize" if version >= need else "PodmanArgs"


def kube_paths(data: bytes, path: str) -> list[str]:
    """The Kubernetes files a ``.kube`` unit plays (``Yaml=``, relative to the unit)."""
    if not path.lower().endswith(".kube"):
        return []
    text = data.decode("utf-8", "replace")
    entries, _ = _entries(text, "Kube")
    return [
        os.path.normpath(os.path.join(os.path.dirname(path), e.value.strip()))
        for e in entries
        if e.key == "Yaml" and e.value.strip()
    ]

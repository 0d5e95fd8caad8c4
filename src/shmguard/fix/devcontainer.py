"""The edit that adds a ``docker run`` flag to a Dev Container configuration's ``runArgs``
(:mod:`shmguard.sources.devcontainer`), written as the file writes its JSON: after the last
argument, on a new line at its indentation (tabs kept) when the array closes on a line of its
own, else ``, "--shm-size=1g"`` before the ``]``; a configuration without ``runArgs`` gets
``"runArgs": ["--shm-size=1g"]`` after its last member. Comments and trailing commas stay
where they are: the offsets are the original file's (the blanked text has the same bytes
elsewhere)."""

from __future__ import annotations

import json

from shmguard.model.finding import Edit
from shmguard.sources.devcontainer import DevContainer
from shmguard.sources.yamlnode import YNode


def _indent(data: bytes, at: int) -> bytes:
    start = data.rfind(b"\n", 0, at) + 1
    line = data[start:at]
    return line[: len(line) - len(line.lstrip(b" \t"))]


def _eol(data: bytes) -> bytes:
    nl = data.find(b"\n")
    return b"\r\n" if nl > 0 and data[nl - 1 : nl] == b"\r" else b"\n"


def _after_last(data: bytes, raw: bytes, node: YNode, last: YNode | None, text: str) -> Edit | None:
    """Insert ``text`` as the last entry of the JSON array or object ``node`` (``data``: the
    blanked text, ``raw``: the original, whose indentation is copied)."""
    close = node.end - 1
    if data[close : close + 1] not in (b"]", b"}"):
        return None
    if last is None:  # empty: [] or {}
        return Edit(close, close, text)
    end = last.end
    if b"\n" in data[end:close]:
        line = _eol(data) + _indent(raw or data, end) + text.encode()
        return Edit(end, end, "," + line.decode())
    return Edit(end, end, ", " + text)


def add_run_arg(dc: DevContainer, flag: str) -> Edit | None:
    """The edit adding ``flag`` (``--shm-size=1g``) to ``dc``'s ``runArgs``, the key added
    when absent; None where the text cannot be placed (an array that is not JSON's)."""
    data = dc.src.data
    word = json.dumps(flag)
    if dc.run_args is not None:
        items = dc.run_args.items
        return _after_last(data, dc.raw, dc.run_args, items[-1] if items else None, word)
    entries = list(dc.root.entries.values())
    last = entries[-1][1] if entries else None
    return _after_last(data, dc.raw, dc.root, last, f'"runArgs": [{word}]')

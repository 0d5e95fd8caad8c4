"""Control characters out of text output (issue 24 item 7).

A value shmguard prints comes from files and clusters it does not control: a Kubernetes
``metadata.name`` or a file name may hold a newline, so a manifest could start a line of its
own in a CI log (``::error file=...::`` in GitHub Actions). :func:`printable` writes every C0
and C1 control character, DEL and the Unicode line and paragraph separators as a visible
escape (``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\u2028``), so one value stays on its line.
The ``github`` format escapes by its own rules (render/github.py).
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: str) -> str:
    """``text`` with its control characters written as escapes (module docstring)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text

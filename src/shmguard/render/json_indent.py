"""``json.dumps(data, indent=2, ensure_ascii=False)``'s exact text, written faster.

CPython encodes with its C encoder only when ``indent`` is None; with an indent every value
goes through the pure-Python ``json.encoder._make_iterencode`` (a generator per container and
a ``yield`` per piece), a quarter of ``check --format json``'s time on a stream of 96k Pods.
Here the structure (the newlines, the two-space indentation, ``,`` between items and ``": "``
after keys, ``{}`` / ``[]`` for empty containers) is written by one recursive function and
every string by the C ``encode_basestring`` that ``json.dumps`` itself uses; ints and floats
are written as ``json`` writes them (``int.__repr__``, ``float.__repr__``, ``NaN`` and
``Infinity``). Anything else (a subclass of ``dict``, ``list``, ``str`` or ``int``, a tuple, a
key that is no ``str``) is handed to ``json.dumps`` itself, so its text (or its error) is the
standard library's. tests/render/test_json_indent.py compares the two on real findings.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any

__all__ = ["indented"]

_INF = float("inf")


def indented(data: Any, level: int = 0) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False)``, each line after the first indented
    by ``level`` more steps (two spaces each), as if ``data`` were written ``level`` deep in a
    document."""
    return _text(data, "\n" + "  " * level)


def _text(o: Any, pad: str) -> str:
    t = type(o)
    if t is str:
        return encode_basestring(o)
    if t is dict:
        if not o:
            return "{}"
        inner = pad + "  "
        parts = []
        for k, v in o.items():
            if type(k) is not str:
                return _stdlib(o, pad)
            tv = type(v)  # (strings and ints written here: most values are, a call saved)
            if tv is str:
                parts.append(inner + encode_basestring(k) + ": " + encode_basestring(v))
            elif tv is int:
                parts.append(inner + encode_basestring(k) + ": " + int.__repr__(v))
            else:
                parts.append(inner + encode_basestring(k) + ": " + _text(v, inner))
        return "{" + ",".join(parts) + pad + "}"
    if t is list:
        if not o:
            return "[]"
        inner = pad + "  "
        return (
            "["
            + ",".join(
                [inner + (encode_basestring(v) if type(v) is str else _text(v, inner)) for v in o]
            )
            + pad
            + "]"
        )
    if t is int:
        return int.__repr__(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if t is float:
        if o != o:
            return "NaN"
        if o == _INF:
            return "Infinity"
        if o == -_INF:
            return "-Infinity"
        return float.__repr__(o)
    return _stdlib(o, pad)


def _stdlib(o: Any, pad: str) -> str:
    """``json.dumps``'s own text of ``o``, its lines after the first indented by ``pad``."""
    text = json.dumps(o, indent=2, ensure_ascii=False)
    # (JSON text holds no raw newline but those of its indentation)
    return text.replace("\n", pad) if pad != "\n" else text

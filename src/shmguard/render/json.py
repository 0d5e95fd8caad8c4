"""The JSON envelope every command prints with ``--json`` (docs/output.md).

``{"schema": "shmguard.<command>/1", "version": "<shmguard version>", ...body}``. Sizes are int
bytes; an unknown :class:`~shmguard.model.Fact` is ``{"value": null, "reason": "..."}``; a known
one is its plain value; enums are their values; tuples are lists; paths are strings.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import PurePath
from typing import Any

from shmguard._version import __version__
from shmguard.estimate.policy import Sized
from shmguard.fix.snippets import Snippet, render_snippets
from shmguard.model.fact import Fact
from shmguard.model.fix import Change
from shmguard.render.json_indent import indented


def to_data(obj: Any) -> Any:
    """Convert dataclasses, facts, enums, paths and containers to JSON-ready data.

    A dataclass with fix values (a ``changes`` field of :class:`~shmguard.model.fix.Change`)
    also gets ``snippets``: the values written in every runtime's syntax by the one snippet
    renderer, so scripts need not render them. A size decision
    (:class:`~shmguard.estimate.policy.Sized`) also keeps ``method``, the name version 1 of
    the schemas gave its basis sentence (explain's ``fix.shm_size``), beside ``basis``.
    """
    kind = type(obj)
    if kind in _LEAVES:  # (most values: the tests below would return them as they are)
        return obj
    names = _FIELDS.get(kind)  # (a dataclass met before, not a Fact: the tests below once)
    if names is None:
        if isinstance(obj, Fact):
            if obj.reason is not None:
                return {"value": None, "reason": obj.reason}
            return to_data(obj.value)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        data = {
            name: v if type(v := getattr(obj, name)) in _LEAVES else to_data(v) for name in names
        }
        changes = getattr(obj, "changes", None)
        if isinstance(changes, tuple) and all(isinstance(c, Change) for c in changes):
            data["snippets"] = to_data(_snippets(changes) if changes else ())
        if isinstance(obj, Sized):
            data["method"] = obj.basis
        return data
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [v if type(v) in _LEAVES else to_data(v) for v in obj]
    return obj


#: Types :func:`to_data` returns as they are (exact types: an enum is a ``str`` or ``int``
#: subclass, and is converted).
_LEAVES = frozenset({str, int, float, bool, type(None)})
#: The field names of each dataclass :func:`to_data` met (``dataclasses.fields``, once per
#: class), a :class:`~shmguard.model.fact.Fact` excepted.
_FIELDS: dict[type, tuple[str, ...]] = {}


@functools.lru_cache(maxsize=256)
def _snippets(changes: tuple[Change, ...]) -> tuple[Snippet, ...]:
    """:func:`~shmguard.fix.snippets.render_snippets` of ``changes`` (frozen values: the same
    fix values, the same snippets; the findings of a stream of Pods share a few)."""
    return render_snippets(changes)


def envelope(command: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Wrap a command's body: ``schema`` = ``shmguard.<command>/1`` plus the tool version."""
    return {"schema": f"shmguard.{command}/1", "version": __version__, **to_data(body)}


def dumps(command: str, body: Mapping[str, Any]) -> str:
    """The envelope as indented JSON text (UTF-8 safe, keys in insertion order)."""
    return json.dumps(envelope(command, body), indent=2, ensure_ascii=False)


def dumps_pieces(command: str, body: Mapping[str, Any]) -> Iterator[str]:
    """Pieces of text that, joined, are exactly ``dumps(command, body)``, each plain mapping
    and list of ``body`` written entry by entry and each other value converted
    (:func:`to_data`) when it is written: a report of 96k findings is never held as one tree
    of dicts or one text (they were 1.1 GB beside the findings' 230 MB)."""
    head = {"schema": f"shmguard.{command}/1", "version": __version__}
    return _pieces({**head, **body}, 0)


def _pieces(obj: Any, level: int) -> Iterator[str]:
    plain = not (
        isinstance(obj, Fact | enum.Enum)
        or (dataclasses.is_dataclass(obj) and not isinstance(obj, type))
    )
    if plain and isinstance(obj, Mapping) and obj:
        pad = "\n" + "  " * (level + 1)
        sep = "{"
        for k, v in obj.items():
            yield f"{sep}{pad}{json.dumps(str(k), ensure_ascii=False)}: "
            yield from _pieces(v, level + 1)
            sep = ","
        yield "\n" + "  " * level + "}"
    elif plain and isinstance(obj, list | tuple) and obj:
        pad = "\n" + "  " * (level + 1)
        sep = "["
        for v in obj:
            yield sep + pad
            yield from _pieces(v, level + 1)
            sep = ","
        yield "\n" + "  " * level + "]"
    else:
        yield indented(to_data(obj), level)


def dumps_streamed(
    command: str,
    key: str,
    items: Iterable[Mapping[str, Any]],
    tail: Callable[[], Mapping[str, Any]],
) -> Iterator[str]:
    """The envelope with one list written item by item, for output that must not wait for (or
    hold) every item: pieces of text that, joined, are exactly
    ``dumps(command, {key: list(items), **tail()})``. ``tail`` is called after the last item,
    so it may report on the items (an exit code, the errors met)."""
    head = json.dumps(envelope(command, {}), indent=2, ensure_ascii=False)
    yield head[: -len("\n}")] + f",\n  {json.dumps(key)}: ["
    first = True
    for item in items:
        text = json.dumps(to_data(item), indent=2, ensure_ascii=False)
        yield ("\n" if first else ",\n") + textwrap.indent(text, "    ")
        first = False
    yield "]" if first else "\n  ]"
    rest = json.dumps(to_data(tail()), indent=2, ensure_ascii=False)
    yield "\n}" if rest == "{}" else "," + rest[1:]

"""The JSON envelope written piece by piece (``explain --per-file --json``) is the same text as
the envelope written at once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from shmguard.render.json import dumps, dumps_pieces, dumps_streamed
from shmguard.triage.model import Fact, InputSummary

ITEMS: list[list[Mapping[str, Any]]] = [
    [],
    [{"file": "a.log", "inputs": [InputSummary("a.log", 10, 2, False)], "notes": []}],
    [
        {"file": "a\nb \u00e9.log", "facts": [Fact("shm_total", 67108864, "x", 3, "64M")]},
        {"file": "<stdin>", "nested": {"list": [1, {"k": None}], "empty": {}}},
    ],
]
TAILS: list[dict[str, Any]] = [
    {},
    {"errors": [], "exit_code": 0},
    {"errors": [{"file": "/no", "error": "no such file"}], "exit_code": 2},
]


@pytest.mark.parametrize("items", ITEMS)
@pytest.mark.parametrize("tail", TAILS)
def test_streamed_text_is_the_whole_document(
    items: list[Mapping[str, Any]], tail: dict[str, Any]
) -> None:
    streamed = "".join(dumps_streamed("explain", "files", iter(items), lambda: tail))
    assert streamed == dumps("explain", {"files": items, **tail})
    doc = json.loads(streamed)
    assert list(doc) == ["schema", "version", "files", *tail]
    assert len(doc["files"]) == len(items)


def test_items_are_taken_one_at_a_time_and_the_tail_after_them() -> None:
    seen: list[str] = []

    def items() -> Iterator[Mapping[str, Any]]:
        for name in ("a", "b"):
            seen.append(name)
            yield {"file": name}

    def tail() -> dict[str, Any]:
        seen.append("tail")
        return {"count": len(seen) - 1}

    pieces = dumps_streamed("explain", "files", items(), tail)
    next(pieces)  # the head: no item asked for yet
    assert seen == []
    next(pieces)
    assert seen == ["a"]
    rest = "".join(pieces)
    assert seen == ["a", "b", "tail"]
    assert rest.endswith('"count": 2\n}')


@pytest.mark.parametrize("items", ITEMS)
@pytest.mark.parametrize("tail", TAILS)
def test_pieces_join_to_the_whole_document(
    items: list[Mapping[str, Any]], tail: dict[str, Any]
) -> None:
    body = {"files": items, "tuple": ({"a": (1, 2.5, True)}, [], "x"), 3: {"k": set()}, **tail}
    assert "".join(dumps_pieces("check", body)) == dumps("check", body)

"""The indented JSON writer (:func:`shmguard.render.json_indent.indented`) writes exactly
``json.dumps(data, indent=2, ensure_ascii=False)``: on every finding ``check`` reports over the
test fixtures (as ``--format json`` converts them), on hand-picked edge cases (unicode,
escapes, big ints, floats, nested empties, keys that are no strings, subclasses) and on
generated JSON values."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmguard.lint.check import check_loaded
from shmguard.lint.config import RULES
from shmguard.render.json import to_data
from shmguard.render.json_indent import indented
from shmguard.sources.load import load_bytes, load_path

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = [
    p
    for d in (TESTS / "lint" / "config", TESTS / "fixtures")
    for p in sorted(d.rglob("*"))
    if p.is_file() and p.suffix in (".yaml", ".yml", ".json", ".sh", ".container", ".toml")
]


def _standard(data: Any, level: int = 0) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False).replace("\n", "\n" + "  " * level)


def _findings_data() -> list[Any]:
    """Every finding of the fixtures and of each rule's documented bad example, as data."""
    loaded = [load_path(str(path)) for path in FIXTURES]
    loaded += [
        load_bytes(r.doc.bad.text.encode(), r.doc.bad.file) for r in RULES if r.doc.bad is not None
    ]
    return [to_data(f) for lf in loaded for f in check_loaded(lf).findings]


FINDINGS = _findings_data()


def test_the_fixtures_give_findings_with_fixes() -> None:
    assert len(FINDINGS) > 50
    assert any(d["fix"] and d["fix"]["edits"] and d["fix"]["snippets"] for d in FINDINGS)


@pytest.mark.parametrize("level", [0, 1, 3])
def test_every_finding_is_written_as_json_dumps_writes_it(level: int) -> None:
    for data in FINDINGS:
        assert indented(data, level) == _standard(data, level)


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


CASES: list[Any] = [
    {},
    [],
    [{}],
    [[]],
    {"a": {}, "b": [], "c": [{}, []], "d": {"e": {"f": []}}},
    "",
    "caf\u00e9 \u2028 \u2029 \U0001f600 \u00a0",
    'quote " backslash \\ slash / tab \t newline \n cr \r nul \x00 del \x7f esc \x1b',
    {'key "quoted"\n\u00e9': "v"},
    0,
    -1,
    2**64 + 1,
    -(10**30),
    True,
    False,
    None,
    [True, False, None, 0, 1.0],
    0.1,
    -0.0,
    1e300,
    1.5e-300,
    123456789.125,
    math.nan,
    math.inf,
    -math.inf,
    {"n": [math.nan, math.inf, -math.inf]},
    {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
    {"nested": {1: "x"}},
    (1, 2, (3, {})),
    {"t": ()},
    [Color.RED, Name("sub"), {"k": Name("v")}],
    {Name("sub key"): 1},
]


@pytest.mark.parametrize("data", CASES, ids=repr)
@pytest.mark.parametrize("level", [0, 2])
def test_edge_cases_are_written_as_json_dumps_writes_them(data: Any, level: int) -> None:
    assert indented(data, level) == _standard(data, level)


def test_a_value_json_cannot_write_raises_its_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented({"a": [object()]})
    with pytest.raises(TypeError, match="not JSON serializable"):
        json.dumps({"a": [object()]}, indent=2)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(JSON, st.integers(min_value=0, max_value=4))
def test_generated_values_are_written_as_json_dumps_writes_them(data: Any, level: int) -> None:
    assert indented(data, level) == _standard(data, level)

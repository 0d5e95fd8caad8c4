"""YMap.value_map: the values of :attr:`YMap.entries` (same keys, order, views' paths and
``shared`` flags), built without the key views."""

from __future__ import annotations

import pytest

from shmguard.sources.yamlload import load_yaml
from shmguard.sources.yamlnode import YMap, YScalar


def _maps(text: str) -> list[YMap]:
    """The root mapping and its mapping values, of a fresh load (each test compares two)."""
    yf = load_yaml(text.encode(), "t.yaml")
    assert not yf.diagnostics
    root = yf.documents[-1].root
    assert isinstance(root, YMap)
    return [root, *(v for _, (_, v) in sorted(root.entries.items()) if isinstance(v, YMap))]


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: {c: 2}\nd: [x]\n",
        "a: 1\nb: 2\na: 3\nc: 4\n",  # a duplicate: last wins, in the last one's place
        "x: &x {k: 1, j: 2}\ny:\n  <<: *x\n  j: 3\n  m: 4\n",  # merge keys
        "? [complex]\n: 1\nplain: 2\n",  # a complex key is left out
        "{}\n",
    ],
)
def test_value_map_is_entries_without_keys(text: str) -> None:
    for got_map, want_map in zip(_maps(text), _maps(text), strict=True):
        got = got_map.value_map()
        want = {k: v for k, (_, v) in want_map.entries.items()}
        assert list(got) == list(want)
        for k, g in got.items():
            w = want[k]
            assert type(g) is type(w) and g.node.tag == w.node.tag
            assert (g.path, g.shared, g.start, g.end) == (w.path, w.shared, w.start, w.end)


def test_value_map_values() -> None:
    (root,) = _maps("a: 1\nb: 2\na: 3\n")
    assert {k: v.value for k, v in root.value_map().items() if isinstance(v, YScalar)} == {
        "b": "2",
        "a": "3",
    }
    (root, ann) = _maps("annotations: {a: '1', b: x}\n")
    vm = ann.value_map()
    assert vm["a"] is ann.get("a") and isinstance(vm["a"], YScalar) and vm["a"].value == "1"
    assert vm["b"].path == "annotations.b"

"""The YAML node layer: positions (bytes, lines, columns), tags, duplicates, merges, aliases."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from shmguard.sources.yamlload import load_yaml
from shmguard.sources.yamlnode import YMap, YScalar, YSeq, walk


def _scalars(data: bytes) -> list[YScalar]:
    yf = load_yaml(data, "t.yaml")
    assert not yf.diagnostics
    return [n for d in yf.documents if d.root for n in walk(d.root) if isinstance(n, YScalar)]


def test_positions_non_ascii_and_crlf() -> None:
    data = "a: 'héllo'\r\nb: ünï\r\nc: [x, \"é\"]\r\n".encode()
    by_path = {(s.path, s.value): s for s in _scalars(data)}
    s = by_path[("a", "héllo")]
    assert (s.start, s.end, s.line, s.column, s.end_column) == (3, 11, 1, 4, 11)
    assert data[s.start : s.end] == "'héllo'".encode() and s.style == "single"
    b = by_path[("b", "ünï")]
    assert (b.line, b.column) == (2, 4)
    assert data[b.start : b.end] == "ünï".encode()
    e = by_path[("c[1]", "é")]
    assert data[e.start : e.end] == '"é"'.encode() and e.style == "double"


def test_bom_is_skipped_but_offsets_count_it() -> None:
    data = b"\xef\xbb\xbfa: b\n"
    (_key, val) = _scalars(data)
    assert data[val.start : val.end] == b"b" and val.start == 6


def test_yaml11_tags_and_raw_text() -> None:
    got = {s.path: s for s in _scalars(b"on_: on\noct: 012\nexp: 1.5e9\nf: 1.5e+9\nq: '12'\n")}
    assert got["on_"].yaml11() is True and got["on_"].raw == "on"
    assert got["oct"].yaml11() == 10 and got["oct"].tag.endswith(":int")
    assert got["exp"].yaml11() == "1.5e9" and got["exp"].tag.endswith(":str")
    assert got["f"].yaml11() == 1.5e9
    assert got["q"].yaml11() == "12" and not got["q"].plain


def test_duplicate_keys_last_wins() -> None:
    root = load_yaml(b"a: 1\nb: 2\na: 3\n").documents[0].root
    assert isinstance(root, YMap)
    a = root.get("a")
    assert isinstance(a, YScalar) and a.value == "3" and a.line == 3
    (key, overridden) = root.duplicates[0]
    assert key == "a" and [k.line for k in overridden] == [1]


def test_merge_keys_and_aliases_are_shared() -> None:
    data = (
        b"x-gpu: &gpu\n  shm_size: 1g\n  ipc: host\n"
        b"services:\n  a:\n    <<: *gpu\n    ipc: private\n"
    )
    root = load_yaml(data).documents[0].root
    a = root.get("services").get("a")  # type: ignore[union-attr]
    assert isinstance(a, YMap)
    shm, ipc = a.get("shm_size"), a.get("ipc")
    assert isinstance(shm, YScalar) and shm.value == "1g" and shm.shared
    assert shm.path == "services.a.shm_size" and shm.line == 2
    assert isinstance(ipc, YScalar) and ipc.value == "private" and not ipc.shared
    assert a.keys() == ["ipc", "shm_size"]


def test_multi_document_and_paths() -> None:
    yf = load_yaml(b"---\na: [1, {b.c: 2}]\n---\n# only a comment\n---\nz: 1\n")
    assert [d.index for d in yf.documents] == [0, 1, 2]
    assert yf.documents[1].root is None
    seq = yf.documents[0].root.get("a")  # type: ignore[union-attr]
    assert isinstance(seq, YSeq)
    inner = seq.items[1]
    assert isinstance(inner, YMap) and inner.get("b.c").path == 'a[1]["b.c"]'  # type: ignore[union-attr]


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85\u2028\u2029\ufeff"),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(_text, st.one_of(_text, st.lists(_text, max_size=3)), max_size=6),
    st.booleans(),
    st.booleans(),
)
def test_every_scalar_slice_is_its_raw_text(doc: dict, flow: bool, crlf: bool) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True, default_flow_style=flow)
    if crlf:
        text = text.replace("\n", "\r\n")
    data = text.encode()
    yf = load_yaml(data, "h.yaml")
    assert not yf.diagnostics
    for d in yf.documents:
        for n in walk(d.root):
            assert n.src.data[n.start : n.end].decode() == n.raw
            if (isinstance(n, YScalar) and n.style in ("single", "double")) or (
                isinstance(n, YScalar) and n.plain and "\n" not in n.raw
            ):
                # the slice alone parses back to the same value
                assert yaml.safe_load(n.raw) == n.yaml11() or n.raw.strip() != n.raw

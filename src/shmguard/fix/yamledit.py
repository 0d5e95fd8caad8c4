"""Splices that add entries to YAML mappings and sequences without re-dumping the file.

A value to add is a small tree (:data:`Value`: str scalars, lists, dicts in order). It is
written in the style of the collection it goes into: block style at that collection's
indentation (sequence items indented as the file indents them), or flow style
(``{a: b, c: [d]}``) inside a flow collection, with the file's own line ending. The edit is an
insertion (:class:`~shmguard.model.finding.Edit` with ``start == end``): every other byte of the
file stays.

Where the text cannot be placed exactly, the helpers return None and the caller offers no
applied fix: a collection reached through an alias or a merge key (an edit would change every
user of the anchor), a sequence whose last entry is an alias or a block scalar (``|``/``>``,
whose end PyYAML reports after its trailing lines; a mapping ending so takes the new entry
after its first one, or before it), an anchor or tag before a block sequence, tabs in the
indentation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypeAlias

import yaml

from shmguard.model.finding import Edit
from shmguard.sources.text import SourceText
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq

#: A value to write: a plain scalar's text, a sequence, or a mapping (insertion order kept).
Value: TypeAlias = str | list["Value"] | dict[str, "Value"]


@dataclass(frozen=True)
class Style:
    """How the file indents block collections.

    Attributes:
        step: spaces a nested mapping is indented by, relative to its key.
        seq: spaces a sequence's ``-`` is indented by, relative to its key (0: indentless,
            ``key:\\n- item``).
        item: columns from a ``-`` to the item's first key (2 for ``- name: x``).
    """

    step: int = 2
    seq: int = 2
    item: int = 2


def flow(v: Value, as_json: bool = False) -> str:
    """``v`` in flow style: ``{name: dshm, emptyDir: {medium: Memory}}``; with ``as_json``,
    keys and strings double-quoted (``{"name": "dshm"}``: JSON, and YAML too)."""
    if isinstance(v, str):
        return json.dumps(v) if as_json else v
    if isinstance(v, list):
        return "[" + ", ".join(flow(x, as_json) for x in v) + "]"
    key = json.dumps if as_json else str
    return "{" + ", ".join(f"{key(k)}: {flow(x, as_json)}" for k, x in v.items()) + "}"


def json_text(src: SourceText) -> bool:
    """Whether kubectl reads ``src`` as JSON: its first character after white space is ``{``
    (``hasJSONPrefix`` in k8s.io/apimachinery/pkg/util/yaml, which YAMLOrJSONDecoder asks), so
    text added to it must be JSON. A byte order mark is skipped too: JSON text is YAML as
    well, so quoting where it was not needed costs nothing."""
    return src.data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def entry_lines(key: str, v: Value, style: Style) -> list[str]:
    """The block lines of ``key: v``, the key at column 0."""
    if isinstance(v, str):
        return [f"{key}: {v}"]
    if isinstance(v, dict):
        return [f"{key}:", *(" " * style.step + line for line in mapping_lines(v, style))]
    out = [f"{key}:"]
    for item in v:
        out += [" " * style.seq + line for line in item_lines(item, style)]
    return out


def mapping_lines(v: dict[str, Value], style: Style) -> list[str]:
    """The block lines of a mapping's entries, at column 0."""
    return [line for k, x in v.items() for line in entry_lines(k, x, style)]


def item_lines(item: Value, style: Style) -> list[str]:
    """The block lines of one sequence item, its ``-`` at column 0."""
    pad = max(style.item, 2)
    if isinstance(item, dict):
        body = [" " * pad + line for line in mapping_lines(item, style)]
    elif isinstance(item, str):
        body = [" " * pad + item]
    else:
        body = [" " * pad + flow(item)]
    return ["-" + body[0][1:], *body[1:]]


def _inside(parent: yaml.Node, child: yaml.Node) -> bool:
    return (
        parent.start_mark.index <= child.start_mark.index
        and child.end_mark.index <= parent.end_mark.index
    )


def content_end(node: yaml.Node) -> int | None:
    """The character index just past the last token of ``node``'s own text, or None when it
    cannot be known exactly (an alias or block scalar last, an empty block collection).

    PyYAML ends a block collection where the next token starts (after blank lines and
    comments), so the end is taken from the last scalar or flow collection inside it.
    """
    n = node
    while isinstance(n, (yaml.MappingNode, yaml.SequenceNode)) and not getattr(
        n, "flow_style", False
    ):
        if not n.value:
            return None
        last = n.value[-1][1] if isinstance(n, yaml.MappingNode) else n.value[-1]
        if not _inside(n, last):
            return None  # an alias: its text is elsewhere
        n = last
    if isinstance(n, yaml.ScalarNode) and n.style in ("|", ">"):
        return None
    return int(n.end_mark.index)


def _after_line(src: SourceText, char_index: int) -> tuple[int, str]:
    """The byte offset of the start of the line after ``char_index``, and the text to put
    before an insertion there (a line ending when the file ends without one)."""
    at = src.byte_offset(char_index)
    nl = src.data.find(line_break(src), at)
    if nl < 0:
        return len(src.data), line_ending(src)
    return nl + 1, ""


def _lines(src: SourceText, lines: list[str], indent: int) -> str:
    eol = line_ending(src)
    return "".join(" " * indent + line + eol for line in lines)


def _line_indent(data: bytes, at: int) -> int:
    """Spaces at the start of the line holding byte ``at``."""
    start = data.rfind(b"\n", 0, at) + 1
    line = data[start:at]
    return len(line) - len(line.lstrip(b" "))


def _flow_insert(src: SourceText, node: YNode, key: str | None, v: Value) -> Edit | None:
    """Insert ``key: v`` (``v`` alone when ``key`` is None) as the last entry of a flow
    collection (before its ``}`` / ``]``).

    Where the collection ends on a line of its own (pretty-printed JSON, a multi-line flow
    mapping), the entry goes after the last one, on a new line at that entry's indentation, and
    in a JSON document it is itself pretty-printed at the file's indentation step (the last
    entry's indentation less the collection's), or on one line in a list whose last item is on
    one line: the file reads as if it had been written so.
    Elsewhere: ``, entry`` right before the closing bracket."""
    as_json = json_text(src)
    name = (json.dumps(key) if as_json else key) if key is not None else None
    end = node.end
    data = src.data
    close = data[end - 1 : end]
    if close not in (b"}", b"]"):
        return None
    inner = data[node.start + 1 : end - 1].strip()
    children = getattr(node.node, "value", None) or []
    tail = children[-1] if children else None
    tail = tail[1] if isinstance(tail, tuple) else tail  # a mapping's last (key, value)
    # just past the last entry's own text (a comment after it stays after the new entry)
    last = src.byte_offset(tail.end_mark.index) if tail is not None else node.start + 1
    if inner and node.start < last < end and b"\n" in data[last : end - 1]:
        indent = _line_indent(data, last - 1)
        step = indent - _line_indent(data, node.start)
        items = getattr(node.node, "value", None)
        one_line = (  # a list of one-line items takes one more
            key is None
            and isinstance(items, list)
            and bool(items)
            and items[-1].start_mark.line == items[-1].end_mark.line
        )
        if as_json and step > 0 and not one_line:
            body = json.dumps(v, indent=step).replace("\n", line_ending(src) + " " * indent)
        else:
            body = flow(v, as_json)
        text = body if name is None else f"{name}: {body}"
        sep = "" if inner.endswith(b",") else ","
        return Edit(last, last, sep + line_ending(src) + " " * indent + text)
    text = flow(v, as_json) if name is None else f"{name}: {flow(v, as_json)}"
    sep = "" if not inner or inner.endswith(b",") else ", "
    return Edit(end - 1, end - 1, sep + text)


def add_entry(m: YMap, key: str, v: Value, style: Style) -> Edit | None:
    """An edit adding ``key: v`` as the last entry of mapping ``m`` (block or flow); in a
    block mapping whose end cannot be known, after its first entry (see
    :func:`_first_entry_end`) or else before it, when its key starts its line."""
    if m.shared:
        return None
    node = m.node
    if getattr(node, "flow_style", False):
        return _flow_insert(m.src, m, key, v)
    if not node.value:
        return None
    indent = int(node.value[0][0].start_mark.column)
    lines = entry_lines(key, v, style)
    end = content_end(node)
    if end is None and isinstance(node, yaml.MappingNode):
        end = _first_entry_end(node)
        if end is None:  # before the first key, when that starts its line
            at = m.src.byte_offset(node.value[0][0].start_mark.index)
            line_start = m.src.data.rfind(line_break(m.src), 0, at) + 1
            if m.src.data[line_start:at].strip(b" "):
                return None
            return Edit(line_start, line_start, _lines(m.src, lines, indent))
    if end is None:
        return None
    at, before = _after_line(m.src, end)
    return Edit(at, at, before + _lines(m.src, lines, indent))


def _first_entry_end(node: yaml.MappingNode) -> int | None:
    """Where a block mapping whose end cannot be known (a block scalar last: a container's
    ``command: |`` script) can take a new entry: the end of its first entry when that is a
    one-line scalar, a later key starting the next line (``- name: app`` then ``image:``)."""
    (key, value), *rest = node.value
    if not rest or not isinstance(value, yaml.ScalarNode) or value.style in ("|", ">"):
        return None
    if not (_inside(node, key) and _inside(node, value)):
        return None  # a merge key or an alias: its text is elsewhere
    if value.start_mark.line != key.start_mark.line or value.end_mark.line != key.start_mark.line:
        return None
    nxt = rest[0][0]
    if nxt.start_mark.line <= key.start_mark.line or nxt.start_mark.column != key.start_mark.column:
        return None
    return int(value.end_mark.index)


#: How a null is written in plain YAML: nothing, ``~`` or ``null`` in any case (YAML 1.1).
_NULLS = ("", "~", "null", "Null", "NULL")


def fill_null(m: YMap, key: str, v: Value) -> Edit | None:
    """An edit giving ``key``, written in ``m`` with no value or a null (``volumes:``,
    ``resources: ~``: what Helm renders from an empty value), the value ``v`` in flow style
    (``volumes: [{name: dshm, ...}]``), or None: ``key`` absent or not a null, or ``m``'s text
    shared through an anchor. A comment after the key stays after the value."""
    pair = m.entries.get(key)
    if m.shared or pair is None:
        return None
    key_view, value = pair
    if not isinstance(value, YScalar) or value.shared or value.style != "plain":
        return None
    if value.tag != "tag:yaml.org,2002:null" or value.raw.strip() not in _NULLS:
        return None
    text = flow(v, json_text(m.src))
    if value.raw.strip():
        return Edit(value.start, value.end, text)
    # an empty null: PyYAML marks it where the next token starts; write right after the colon
    colon = m.src.data.find(b":", key_view.end)
    if colon < 0 or m.src.data[key_view.end : colon].strip():
        return None
    return Edit(colon + 1, colon + 1, " " + text)


def add_item(s: YSeq, item: Value, style: Style) -> Edit | None:
    """An edit appending ``item`` to sequence ``s`` (block or flow)."""
    if s.shared:
        return None
    node = s.node
    if getattr(node, "flow_style", False):
        return _flow_insert(s.src, s, None, item)
    if not node.value or s.src.data[s.start : s.start + 1] != b"-":
        return None
    end = content_end(node)
    if end is None:
        return None
    dash = int(node.start_mark.column)
    first = node.value[0]
    item_off = int(first.start_mark.column) - dash
    if first.start_mark.line != node.start_mark.line or item_off < 2:
        item_off = style.item
    st = Style(style.step, style.seq, item_off)
    at, before = _after_line(s.src, end)
    return Edit(at, at, before + _lines(s.src, item_lines(item, st), dash))


def seq_style(key_node: YNode | None, seq: YNode | None, default: Style | None = None) -> Style:
    """The style of a block sequence ``seq`` written under the key ``key_node``: how far its
    ``-`` is indented from the key and its items' keys from the ``-``."""
    base = default or Style()
    if (
        not isinstance(seq, YSeq)
        or key_node is None
        or getattr(seq.node, "flow_style", False)
        or not len(seq)
    ):
        return base
    if seq.src.data[seq.start : seq.start + 1] != b"-":
        return base
    dash = seq.column
    off = dash - key_node.column
    first = seq.node.value[0]
    item = int(first.start_mark.column) + 1 - dash
    if first.start_mark.line + 1 != seq.line or item < 2:
        item = base.item
    return Style(step=max(2, base.step), seq=max(0, off), item=item)


def line_ending(src: SourceText) -> str:
    """The file's line ending: ``\\r\\n`` when its first line ends so, ``\\r`` in a file
    with CRs and no LF (classic Mac OS; YAML reads a lone CR as a line break), else
    ``\\n``."""
    nl = src.data.find(b"\n")
    if nl < 0:
        return "\r" if b"\r" in src.data else "\n"
    return "\r\n" if nl > 0 and src.data[nl - 1 : nl] == b"\r" else "\n"


def line_break(src: SourceText) -> bytes:
    """The byte that ends each line of the file (its :func:`line_ending`'s last): ``\\r`` in
    a CR-only file, else ``\\n``; what to search for the start or end of a line."""
    return line_ending(src)[-1].encode()

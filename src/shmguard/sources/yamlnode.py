"""A light view over PyYAML's composed node graph, with exact positions and YAML paths.

Each view (:class:`YMap`, :class:`YSeq`, :class:`YScalar`) wraps one ``yaml.Node`` and knows
its logical YAML path (``spec.template.spec.volumes[1].emptyDir.sizeLimit``), its start and end
as 1-based line/column and as byte offsets into the original file, and, for scalars, the raw
source text, the quoting style and the tag PyYAML (YAML 1.1) resolved: ``on`` is a bool,
``012`` an int, ``1.5e9`` a str. Later rules type values as each target's parser does
(compose-go reads YAML 1.2) from :attr:`YScalar.raw`.

Mappings follow PyYAML and kubectl: a duplicate key keeps the *last* value
(:attr:`YMap.duplicates` lists the ones overridden). Merge keys ``<<`` (a mapping or a sequence
of mappings, yaml.org/type/merge) are resolved on access: explicit keys win, then earlier merge
sources; a merged value keeps the positions of the node that takes effect (in the anchor) and is
marked :attr:`YNode.shared`, as is any node reached through an alias, so a fixer knows an edit
there changes every user of the anchor. Views are built lazily, so a rule that reads five
fields of a 1 MB manifest costs five lookups, not a copy of the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from shmguard.model.finding import Location
from shmguard.sources.text import SourceText

_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_STYLES = {None: "plain", "": "plain", "'": "single", '"': "double", "|": "literal", ">": "folded"}
#: envsubst ``$X``/``${X}``, Helm/Jinja/Go ``{{ }}``, ``__X__``, ``<X>`` placeholders.
_PLACEHOLDER = re.compile(r"\$\{?[A-Za-z_]|\{\{|\{%|__[A-Z][A-Z0-9_]*__|<[A-Za-z][\w -]*>")
_CONSTRUCTOR = yaml.SafeLoader("")


def child_path(parent: str, key: str | int) -> str:
    """The YAML path of ``key`` under ``parent``: ``a.b``, ``a[2]``, ``a["x.io/y"]``."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{parent}[{quoted}]"


class YNode:
    """One node: its path, positions and source text (base of the three kinds).

    Attributes:
        node: the wrapped ``yaml.Node``.
        path: the logical YAML path ("" for a document root).
        src: the file's :class:`~shmguard.sources.text.SourceText`.
        shared: True when this node was reached through an alias or a merge key, so its text
            lives in an anchor that other places use too.
    """

    __slots__ = ("_cell", "node", "shared", "src")

    def __init__(
        self,
        node: yaml.Node,
        path: str | None,
        src: SourceText,
        shared: bool = False,
        parent: YNode | None = None,
        key: str | int = "",
    ):
        # path None: the child ``key`` of ``parent``, its path built when first read. The
        # path lives in a cell, [path or None, the parent's cell, key], which refers up to
        # cells only, never to views: a parent keeps its children's views and a child no
        # view above it, so a file's views and nodes hold no reference cycle and go as soon
        # as the last reference does, without waiting for the cyclic garbage collector.
        self.node = node
        self._cell: list[Any] = [path, parent._cell if parent is not None else None, key]
        self.src = src
        self.shared = shared

    @property
    def path(self) -> str:
        """The logical YAML path ("" for a document root); a child's is built on first use."""
        path = self._cell[0]
        return _cell_path(self._cell) if path is None else path

    @property
    def start(self) -> int:
        """Byte offset where the node starts (quotes and block indicators included)."""
        return self.src.byte_offset(self.node.start_mark.index)

    @property
    def end(self) -> int:
        """Byte offset just past the node (for block collections PyYAML puts this where the next
        token starts, so it can include trailing line breaks and comments)."""
        return self.src.byte_offset(self.node.end_mark.index)

    @property
    def line(self) -> int:
        """1-based line of the start."""
        return int(self.node.start_mark.line) + 1

    @property
    def column(self) -> int:
        """1-based character column of the start."""
        return int(self.node.start_mark.column) + 1

    @property
    def end_line(self) -> int:
        """1-based line of the end."""
        return int(self.node.end_mark.line) + 1

    @property
    def end_column(self) -> int:
        """1-based exclusive character column of the end."""
        return int(self.node.end_mark.column) + 1

    @property
    def raw(self) -> str:
        """The node's source text: the bytes ``start:end`` of the file, decoded."""
        return self.src.data[self.start : self.end].decode("utf-8", "replace")

    def location(self) -> Location:
        """A :class:`~shmguard.model.finding.Location` for a finding on this node."""
        return Location(
            self.src.file,
            self.line,
            self.column,
            self.end_line,
            self.end_column,
            self.start,
            self.end,
            self.path,
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path or '<root>'} @{self.line}:{self.column}>"


class YScalar(YNode):
    """A scalar: its text after YAML unquoting (:attr:`value`), :attr:`raw` text, style, tag."""

    __slots__ = ()

    @property
    def value(self) -> str:
        """The scalar's string value as YAML reads it (quotes removed, escapes applied)."""
        return str(self.node.value)

    @property
    def tag(self) -> str:
        """The YAML 1.1 tag PyYAML resolved, e.g. ``tag:yaml.org,2002:bool`` for ``on``."""
        return str(self.node.tag)

    @property
    def style(self) -> str:
        """``plain``, ``single``, ``double``, ``literal`` or ``folded``."""
        return _STYLES.get(getattr(self.node, "style", None), "plain")

    @property
    def plain(self) -> bool:
        """True for an unquoted plain scalar (the only kind YAML resolves to non-strings)."""
        return self.style == "plain"

    @property
    def placeholder(self) -> bool:
        """True when the value holds a template placeholder (``${X}``, ``$X``, ``{{ }}``,
        ``__X__``, ``<X>``): its real value is unknown until rendered."""
        return _PLACEHOLDER.search(self.value) is not None

    def yaml11(self) -> Any:
        """The value as PyYAML (YAML 1.1, Compose v1) constructs it: bool, int, float, None or
        str. Never raises: a value PyYAML cannot construct comes back as its string."""
        fn = _CONSTRUCTOR.yaml_constructors.get(self.node.tag)
        try:
            return fn(_CONSTRUCTOR, self.node) if fn else self.value
        except (yaml.YAMLError, ValueError, TypeError, OverflowError):
            return self.value


class _Collection(YNode):
    __slots__ = ()

    def _shared_child(self, n: yaml.Node) -> bool:
        return self.shared or not (
            self.node.start_mark.index <= n.start_mark.index
            and n.end_mark.index <= self.node.end_mark.index
        )


class YSeq(_Collection):
    """A sequence; :attr:`items` are its element views, in order."""

    __slots__ = ("_items",)

    def __init__(
        self,
        node: yaml.Node,
        path: str | None,
        src: SourceText,
        shared: bool = False,
        parent: YNode | None = None,
        key: str | int = "",
    ):
        # (YNode.__init__ inlined: one view per node of the file is made)
        self.node = node
        self._cell = [path, parent._cell if parent is not None else None, key]
        self.src = src
        self.shared = shared
        self._items: list[YNode] | None = None

    @property
    def items(self) -> list[YNode]:
        """The element views (built on first access)."""
        if self._items is None:
            self._items = [
                _wrap_child(n, self, i, self._shared_child(n))
                for i, n in enumerate(self.node.value)
            ]
        return self._items

    def __iter__(self) -> Iterator[YNode]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.node.value)


class YMap(_Collection):
    """A mapping with last-wins duplicate keys and resolved merge keys.

    :attr:`entries` maps each key string to ``(key view, value view)``; complex (non-scalar)
    keys are left out. :attr:`duplicates` lists ``(key, overridden key views)``.
    """

    __slots__ = ("_dups", "_entries", "_kids", "_raw")

    def __init__(
        self,
        node: yaml.Node,
        path: str | None,
        src: SourceText,
        shared: bool = False,
        parent: YNode | None = None,
        key: str | int = "",
    ):
        # (YNode.__init__ inlined: one view per node of the file is made)
        self.node = node
        self._cell = [path, parent._cell if parent is not None else None, key]
        self.src = src
        self.shared = shared
        self._entries: dict[str, tuple[YScalar, YNode]] | None = None
        self._dups: list[tuple[str, list[YScalar]]] | None = None
        self._raw: dict[str, yaml.Node] | None = None
        self._kids: dict[str, YNode | None] | None = None

    @property
    def entries(self) -> dict[str, tuple[YScalar, YNode]]:
        """Key -> (key view, value view), in first-appearance order (built on first access)."""
        if self._entries is None:
            self._entries = self._build(self.node, set())
        return self._entries

    @property
    def duplicates(self) -> list[tuple[str, list[YScalar]]]:
        """Keys written more than once here: ``(key, [the overridden key views])``."""
        _ = self.entries
        return self._dups if self._dups is not None else []

    def _build(self, node: yaml.Node, seen: set[int]) -> dict[str, tuple[YScalar, YNode]]:
        own: dict[str, tuple[YScalar, YNode]] = {}
        merges: list[yaml.Node] = []
        overridden: dict[str, list[YScalar]] = {}
        top = node is self.node
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                continue
            if k.tag == _MERGE_TAG:
                merges.extend(v.value if isinstance(v, yaml.SequenceNode) else [v])
                continue
            key = str(k.value)
            shared = not top or self._shared_child(v)
            kv = YScalar(k, None, self.src, shared, self, key)
            if key in own:
                overridden.setdefault(key, []).append(own[key][0])
                del own[key]  # re-inserted below: "last wins" keeps the last one's order
            own[key] = (kv, _wrap_child(v, self, key, shared))
        if top:
            self._dups = list(overridden.items())
        for m in merges:
            if isinstance(m, yaml.MappingNode) and id(m) not in seen:
                seen.add(id(m))
                for key, pair in self._build(m, seen).items():
                    own.setdefault(key, pair)
        return own

    def get(self, key: str) -> YNode | None:
        """The value view of ``key``, or None."""
        if self._entries is None:
            # fast path: a plain mapping (no merge key) looked up without building every view;
            # the same view for the same key, so its own lazily built lookups are kept
            kids = self._kids
            if kids is None:
                kids = self._kids = {}
            elif key in kids:
                return kids[key]
            raw = self._raw
            if raw is None:
                raw = self._raw = self._plain()
            if raw is not None:
                v = raw.get(key)
                kid = None if v is None else _wrap_child(v, self, key, self._shared_child(v))
                kids[key] = kid
                return kid
        pair = self.entries.get(key)
        return pair[1] if pair else None

    def _plain(self) -> dict[str, yaml.Node] | None:
        """Key -> value node of a mapping without merge keys (last wins); None with one."""
        raw: dict[str, yaml.Node] = {}
        for k, v in self.node.value:
            if not isinstance(k, yaml.ScalarNode):
                continue
            if k.tag == _MERGE_TAG:
                return None
            raw[str(k.value)] = v
        return raw

    def value_map(self) -> dict[str, YNode]:
        """Key -> value view: :attr:`entries` without the key views (same keys, same order),
        for a caller that reads every value but no key's position."""
        if self._entries is None and self._plain_raw() is not None:
            out: dict[str, YNode] = {}
            get = self.get
            for k, _ in self.node.value:
                if isinstance(k, yaml.ScalarNode):
                    key = str(k.value)
                    out.pop(key, None)  # "last wins" keeps the last one's place, as entries
                    out[key] = get(key)  # type: ignore[assignment]
            return out
        return {k: v for k, (_, v) in self.entries.items()}

    def _plain_raw(self) -> dict[str, yaml.Node] | None:
        raw = self._raw
        if raw is None:
            raw = self._raw = self._plain()
        return raw

    def key_node(self, key: str) -> YScalar | None:
        """The key's own view (where ``key:`` is written), or None."""
        pair = self.entries.get(key)
        return pair[0] if pair else None

    def keys(self) -> list[str]:
        """The effective keys."""
        return list(self.entries)

    def __contains__(self, key: object) -> bool:
        raw = self._plain_raw() if self._entries is None else None
        if raw is not None:  # a plain mapping: the same keys as entries, no view built
            return key in raw
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)


def _cell_path(cell: list[Any]) -> str:
    """The path of a cell whose path is not built yet (and of the cells above it)."""
    chain = []
    while cell[0] is None:
        chain.append(cell)
        cell = cell[1]
    path: str = cell[0]
    for c in reversed(chain):
        path = c[0] = child_path(path, c[2])
    return path


def wrap(node: yaml.Node, path: str, src: SourceText, shared: bool = False) -> YNode:
    """The view of ``node``: :class:`YMap`, :class:`YSeq` or :class:`YScalar`."""
    if isinstance(node, yaml.MappingNode):
        return YMap(node, path, src, shared)
    if isinstance(node, yaml.SequenceNode):
        return YSeq(node, path, src, shared)
    return YScalar(node, path, src, shared)


def _wrap_child(node: yaml.Node, parent: YNode, key: str | int, shared: bool) -> YNode:
    """The view of ``node`` at ``key`` under ``parent``, its path built only when read."""
    return _KINDS.get(type(node), YScalar)(node, None, parent.src, shared, parent, key)


_KINDS: dict[type, type[YNode]] = {yaml.MappingNode: YMap, yaml.SequenceNode: YSeq}


def walk(root: YNode, limit: int = 1_000_000) -> Iterator[YNode]:
    """Every node under ``root`` (``root`` first, depth-first, merges and aliases expanded).

    Raises:
        ValueError: past ``limit`` nodes (an alias bomb that slipped past the loader's check).
    """
    stack = [root]
    count = 0
    while stack:
        n = stack.pop()
        count += 1
        if count > limit:
            raise ValueError(f"more than {limit} nodes")
        yield n
        if isinstance(n, YMap):
            for k, v in reversed(list(n.entries.values())):
                stack += [v, k]
        elif isinstance(n, YSeq):
            stack.extend(reversed(n.items))

"""Load a YAML file into :mod:`~shmguard.sources.yamlnode` views, never raising.

Parsing uses PyYAML's C composer (``yaml.compose_all`` with ``CSafeLoader``, libyaml) and falls
back to the pure-Python ``SafeLoader`` when libyaml is missing; tags are resolved as PyYAML does,
but faster (:class:`_Loader`). Guards, each a per-file
:class:`~shmguard.sources.diagnostics.SourceDiagnostic`:

* size cap, NUL bytes, invalid UTF-8 (:class:`~shmguard.sources.text.SourceText`);
* nesting deeper than :data:`MAX_DEPTH`: libyaml's composer recurses in C and was measured here
  to crash the interpreter (SIGSEGV) at 30,000 nested ``[`` while 10,000 still loads, so a cheap
  upper bound on the depth is checked *before* composing;
* alias bombs ("billion laughs"): composing shares aliased nodes, so it is cheap, but walking
  expands them; the expanded node count is computed on the shared graph (memoised, linear in
  its size) and a file past :data:`MAX_EXPANDED` is refused; a recursive anchor (``&a [*a]``,
  which PyYAML composes into a cycle) is refused too;
* invalid YAML: the parser's message with its line and column; documents before the error are
  kept;
* unrendered Helm/Jinja templates: an *info* diagnostic and the file is skipped. A file is a
  template when a Go-template action names one of Helm's objects or actions (``.Values``,
  ``.Release``, ``{{ include``, ``{{- if``: :data:`_HELM`, checked before parsing), when
  ``{{``/``{%`` is in a file that does not parse, or when it stands outside every scalar value
  of the parsed documents (``replicas: {{ n }}`` is a flow mapping, not a value). A ``{{``
  inside a string value (a block scalar holding a Jinja chat template, a quoted Argo
  ``{{inputs.parameters.x}}``) or a comment is data: the file is read.

Python's cyclic garbage collector is paused while a file is composed
(:mod:`~shmguard.sources.gcpause`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from shmguard.sources import gcpause
from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.text import SourceText
from shmguard.sources.yamlnode import YNode, wrap

try:
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Base = yaml.SafeLoader

_SCALAR_TAG: str = _Base.DEFAULT_SCALAR_TAG
_COLLECTION_TAGS: dict[object, str] = {
    yaml.SequenceNode: _Base.DEFAULT_SEQUENCE_TAG,
    yaml.MappingNode: _Base.DEFAULT_MAPPING_TAG,
}
#: Plain scalar -> the tag PyYAML's implicit resolvers give it (short values only; cleared
#: when full), shared by every file: ``true``, ``80``, ``nvidia`` recur across a corpus.
_TAGS: dict[str, str] = {}
_TAGS_MAX = 100_000
_TAG_VALUE_MAX = 128


class _Loader(_Base):  # type: ignore[misc]
    """PyYAML's safe loader with the same tags, resolved faster.

    The composer asks the resolver for the tag of every node, and descends/ascends it for
    path resolvers, in Python, once per node (about a third of a C compose's time in a profile
    over ../shared/corpus; answered as below, composing the corpus took about 20 % less CPU
    time, measured here). With no path resolver registered (``SafeLoader`` has none; checked
    below), BaseResolver.resolve (PyYAML 6.0, yaml/resolver.py) returns the default tag of a
    collection and of a quoted scalar, and for a plain scalar a tag that depends on its value
    alone: those are returned directly, the last memoised. tests/sources checks the tags
    against PyYAML's own over a corpus of forms.
    """

    def resolve(
        self,
        kind: object,
        value: str | None,
        implicit: tuple[bool, bool],
        _scalar: object = yaml.ScalarNode,
        _tags: dict[str, str] = _TAGS,
    ) -> str:
        # (the defaults make the hot names local; the composer passes three arguments)
        if kind is _scalar:
            if implicit[0]:
                try:
                    return _tags[value]  # type: ignore[index]
                except KeyError:
                    return self._resolve_plain(str(value), implicit)
            return _SCALAR_TAG
        return _COLLECTION_TAGS[kind]

    def _resolve_plain(self, value: str, implicit: tuple[bool, bool]) -> str:
        tag = str(super().resolve(yaml.ScalarNode, value, implicit))
        if len(value) <= _TAG_VALUE_MAX:
            if len(_TAGS) >= _TAGS_MAX:
                _TAGS.clear()
            _TAGS[value] = tag
        return tag

    # The composer calls these once per node and ignores what they return; C builtins (not
    # bound as methods) cost less than Python no-ops: ``{}.get(parent, index)``, ``tuple()``.
    descend_resolver = dict[object, object]().get
    ascend_resolver = tuple


#: The loader used: :class:`_Loader`, or PyYAML's own if a path resolver was registered.
LOADER: Any = _Base if _Base.yaml_path_resolvers else _Loader

#: Deepest nesting accepted (a safe margin under the measured libyaml crash).
MAX_DEPTH = 1000
#: Most nodes a file may expand to through aliases.
MAX_EXPANDED = 500_000

_TEMPLATE = re.compile(r"\{\{|\{%")
#: A ``#`` that opens a comment: at the start of a line or after a blank.
_COMMENT = re.compile(r"(?:^|(?<=[ \t]))#", re.M)
#: Go-template actions only Helm writes: a leading-dot reference to one of Helm's built-in
#: objects (Jinja names have no leading dot), or a Go action or Helm function word (Jinja writes
#: ``{% if %}``, not ``{{ if }}``). A bare ``{{-`` is not one: Jinja trims whitespace the same
#: way, and chat templates in ConfigMaps use it (issue 21's held-out GKE vLLM manifest).
_HELM = re.compile(
    r"\{\{-?\s*(?:[^}]*?[\s(|,])?\.(?:Values|Release|Chart|Capabilities|Files|Template)\b"
    r"|\{\{-?\s*(?:include|template|tpl|toYaml|define|range|if|with|end|else)(?=[\s}-])"
)
_DEEP_INDENT = re.compile(rf"^[ \t]{{{MAX_DEPTH // 2},}}", re.M)
# (?:-[ \t]+){500,}, written to start with a literal so the search skips to each "-"
_DASHES = re.compile(rf"-[ \t]+(?:-[ \t]+){{{MAX_DEPTH // 2 - 1},}}")


@dataclass(frozen=True)
class YamlDoc:
    """One document of a YAML stream: its 0-based index and root view (None when empty)."""

    index: int
    root: YNode | None


@dataclass(frozen=True)
class YamlFile:
    """A loaded YAML file: its text, documents and diagnostics (documents may be partial)."""

    src: SourceText | None
    documents: tuple[YamlDoc, ...]
    diagnostics: tuple[SourceDiagnostic, ...]


_COLLECTIONS = (yaml.MappingNode, yaml.SequenceNode)


def _too_deep(text: str) -> bool:
    """A cheap upper bound on nesting: flow brackets plus indentation plus compact dashes."""
    if text.count("[") + text.count("{") >= MAX_DEPTH // 2:
        depth = best = 0
        for ch in re.findall(r"[\[\]{}]", text):
            depth = depth + 1 if ch in "[{" else max(depth - 1, 0)
            best = max(best, depth)
        if best >= MAX_DEPTH // 2:
            return True
    deep_indent = " " * (MAX_DEPTH // 2) in text or "\t" in text
    return bool(
        (deep_indent and _DEEP_INDENT.search(text))
        or ("- -" in text and text.count("-") >= MAX_DEPTH // 2 and _DASHES.search(text))
    )


def _expanded_size(root: yaml.Node) -> int | None:
    """Nodes in the tree that ``root`` expands to (aliases counted at every use); None for a
    cycle. Iterative and memoised, so linear in the composed graph; scalars count 1 each and
    are never stacked (they have no children and cannot be on a cycle)."""
    if not isinstance(root, (yaml.MappingNode, yaml.SequenceNode)):
        return 1
    memo: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children: list[yaml.Node] = [x for pair in node.value for x in pair]
        else:
            children = node.value
        if done:
            on_path.discard(key)
            size = 1
            for c in children:
                size += memo[id(c)] if isinstance(c, _COLLECTIONS) else 1
            memo[key] = size
            if size > MAX_EXPANDED:
                return size
            continue
        if key in memo:
            continue
        if key in on_path:
            return None
        on_path.add(key)
        stack.append((node, True))
        for c in children:
            if not isinstance(c, _COLLECTIONS):
                continue
            if id(c) in on_path:
                return None
            if id(c) not in memo:
                stack.append((c, False))
    return memo[id(root)]


def load_yaml(data: bytes | SourceText, file: str = "<data>") -> YamlFile:
    """Parse every document of ``data`` into views; diagnostics instead of exceptions."""
    src = data if isinstance(data, SourceText) else SourceText.decode(data, file)
    if isinstance(src, SourceDiagnostic):
        return YamlFile(None, (), (src,))
    diags: list[SourceDiagnostic] = []
    gcpause.pause()
    try:
        docs = list(iter_documents(src, diags))
    finally:
        gcpause.resume()
    if any(d.kind is DiagnosticKind.TEMPLATE for d in diags):
        docs.clear()  # a template that broke the YAML: none of it is read
    text = src.text
    if docs and ("{{" in text or "{%" in text):
        pos = _outside_scalars(text, [d.root.node for d in docs if d.root is not None])
        if pos is not None:
            return YamlFile(src, (), (_template(src.file, text, pos),))
    return YamlFile(src, tuple(docs), tuple(diags))


def _outside_scalars(text: str, roots: list[yaml.Node]) -> int | None:
    """Index in ``text`` of the first ``{{``/``{%`` that is neither inside a scalar value of
    ``roots`` nor in a ``#`` comment; None when every one is data."""
    spans: list[tuple[int, int]] = []
    stack = list(roots)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if "{" in node.value:
                spans.append((node.start_mark.index, node.end_mark.index))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(x for pair in node.value for x in pair)
        else:
            stack.extend(node.value)
    spans.sort()
    starts = [a for a, _ in spans]
    for m in _TEMPLATE.finditer(text):
        pos = m.start()
        i = bisect.bisect_right(starts, pos) - 1
        if i >= 0 and pos < spans[i][1]:
            continue
        line_start = text.rfind("\n", 0, pos) + 1
        if _COMMENT.search(text, line_start, pos):
            continue
        return pos
    return None


def iter_documents(src: SourceText, diagnostics: list[SourceDiagnostic]) -> Iterator[YamlDoc]:
    """The documents of ``src``, each composed when asked for (one document's nodes at a
    time, for a caller that drops each before taking the next), the stream's problems
    appended to ``diagnostics`` as they are met (never raises). :func:`load_yaml` holds them
    all; a ``template`` diagnostic there means none is kept."""
    file, text = src.file, src.text
    if "{{" in text and _HELM.search(text):
        diagnostics.append(_template(file, text))
        return
    if _too_deep(text):
        msg = f"nesting deeper than {MAX_DEPTH // 2} levels (or close to it); not parsed"
        diagnostics.append(SourceDiagnostic(file, 1, 1, msg, DiagnosticKind.TOO_DEEP))
        return
    yield from _compose(src, text, 0, "&" in text and "*" in text, diagnostics)


#: What a document part (:func:`iter_part`) cannot be cut around: a directive or ``...``
#: document end at column 0 (they belong to the documents after or before them), a line
#: break libyaml knows and ``str.splitlines`` / ``\n`` counting would not agree on (a lone CR,
#: NEL, LS, PS) and a byte order mark (libyaml skips it without counting it).
_UNCUTTABLE = re.compile(r"^(?:%|\.\.\.)|\r(?!\n)|[\x85\u2028\u2029\ufeff]", re.M)
#: A document start marker: ``---`` at column 0 followed by a blank or the end of a line. It
#: cannot stand inside a scalar (a block scalar's lines are indented at least one column, a
#: plain scalar ends at it, a quoted one is an error there: YAML 1.2 c-forbidden), so a
#: stream cut just before one is cut between documents.
_MARKER = re.compile(r"^---(?=[ \t\r\n]|\Z)", re.M)
#: Text before the first marker that holds no document: blank and comment lines.
_NO_DOCUMENT = re.compile(r"(?:[ \t\r]*(?:#[^\n]*)?\n)*[ \t\r]*(?:#[^\n]*)?")


@dataclass(frozen=True)
class Part:
    """A run of whole documents of a stream: ``text[start:end]``, ``start`` at a document
    start marker (or 0), whose first document is the stream's ``first`` (0-based)."""

    start: int
    end: int
    first: int


def cut_documents(src: SourceText, n: int) -> tuple[Part, ...] | None:
    """``src``'s text cut into at most ``n`` parts of about equal size, each made of whole
    documents and starting at a document start marker (the first at 0), in order; None when
    it cannot be cut (:data:`_UNCUTTABLE`, one of :func:`iter_documents`' guards, fewer than
    two parts). :func:`iter_part` over every part gives :func:`iter_documents`' documents,
    nodes and positions the same."""
    text = src.text
    if n < 2 or _UNCUTTABLE.search(text) or _too_deep(text):
        return None
    if "{{" in text and _HELM.search(text):
        return None
    cuts = [0]
    for k in range(1, n):
        m = _MARKER.search(text, max(len(text) * k // n, cuts[-1] + 1))
        if m is None:
            break
        if m.start() > cuts[-1]:
            cuts.append(m.start())
    if len(cuts) < 2:
        return None
    head = _MARKER.search(text)
    assert head is not None  # a cut was found at one
    implicit = 0 if _NO_DOCUMENT.fullmatch(text, 0, head.start()) else 1
    firsts = [implicit + len(_MARKER.findall(text, 0, c)) if c else 0 for c in cuts]
    ends = [*cuts[1:], len(text)]
    return tuple(Part(c, e, f) for c, e, f in zip(cuts, ends, firsts, strict=True))


def iter_part(
    src: SourceText, part: Part, diagnostics: list[SourceDiagnostic]
) -> Iterator[YamlDoc]:
    """The documents of ``part`` of ``src`` (from :func:`cut_documents`) as
    :func:`iter_documents` gives them for the whole text: the same indexes, and the same
    positions, since the text composed is the part behind as many characters and line breaks
    as come before it (spaces, then line breaks: blank lines); the part's end is the end of a
    document there too (its last node ends at the next marker's position, where this text
    ends). Problems are appended to ``diagnostics`` (never raises)."""
    text = src.text
    lines = text.count("\n", 0, part.start)
    shown = " " * (part.start - lines) + "\n" * lines + text[part.start : part.end]
    yield from _compose(src, shown, part.first, "&" in text and "*" in text, diagnostics)


def _compose(
    src: SourceText,
    shown: str,
    first: int,
    check_aliases: bool,
    diagnostics: list[SourceDiagnostic],
) -> Iterator[YamlDoc]:
    """The documents composed from ``shown`` (``src``'s text, or a part of it behind blanks
    of the same length), numbered from ``first``; the views are over ``src``."""
    file = src.file
    try:
        for i, node in enumerate(yaml.compose_all(shown, Loader=LOADER), first):
            if node is not None and check_aliases:
                size = _expanded_size(node)
                if size is None or size > MAX_EXPANDED:
                    line, col = node.start_mark.line + 1, node.start_mark.column + 1
                    if size is None:
                        msg = f"document {i + 1}: an anchor refers to itself (recursive alias)"
                        kind = DiagnosticKind.RECURSIVE_ALIAS
                    else:
                        msg = (
                            f"document {i + 1}: aliases expand to more than "
                            f"{MAX_EXPANDED:,} nodes (alias bomb); not read"
                        )
                        kind = DiagnosticKind.ALIAS_BOMB
                    diagnostics.append(SourceDiagnostic(file, line, col, msg, kind))
                    continue
            empty = node is None or (isinstance(node, yaml.ScalarNode) and node.value == "")
            yield YamlDoc(i, None if empty else wrap(node, "", src))
    except yaml.MarkedYAMLError as e:
        if _TEMPLATE.search(src.text):
            diagnostics.append(_template(file, src.text))
        else:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark else None
            col = mark.column + 1 if mark else None
            msg = " ".join(str(x) for x in (e.context, e.problem) if x) or str(e)
            diagnostics.append(SourceDiagnostic(file, line, col, msg, DiagnosticKind.INVALID_YAML))
    except (yaml.YAMLError, RecursionError, MemoryError) as e:
        msg = f"cannot parse: {type(e).__name__}: {e}"
        diagnostics.append(SourceDiagnostic(file, None, None, msg, DiagnosticKind.INVALID_YAML))


def _template(file: str, text: str, pos: int | None = None) -> SourceDiagnostic:
    if pos is None:
        m = _TEMPLATE.search(text)
        pos = m.start() if m else 0
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return SourceDiagnostic(
        file,
        line,
        col,
        "unrendered template ({{ ... }}); skipped: check the rendered output "
        "(helm template ... | shmguard check -)",
        DiagnosticKind.TEMPLATE,
        info=True,
    )

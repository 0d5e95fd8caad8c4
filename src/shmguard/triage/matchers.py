"""The matcher templates and the streaming match loop.

Three templates, chosen by the pattern's fields (see docs/signatures.md):

* **line**: the literal is on the line and the regex matches it (``regex`` omitted: the
  literal itself);
* **marker**: like *line* but only records that it was seen (``marker = true``);
* **after**: like *line*, and a marker of the same signature was seen at most ``within``
  lines before (``after = "marker-name"``), e.g. ``unable to allocate shared memory`` in a
  traceback that passed through ``multiprocessing/queues.py ... in _feed``. The marker must
  be the signature's latest one: another marker in between closes its section (``Requests:``
  after ``Limits:`` in ``kubectl describe``, so a memory request is not read as the limit).

Named capture groups are read in the unit the pattern gives (:func:`read_unit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from shmguard.triage.loader_seen import LITERALS as LOADER_LITERALS
from shmguard.triage.loader_seen import LoaderSeen
from shmguard.triage.model import Evidence, Pattern, Signature
from shmguard.triage.scanner import (
    BlockReader,
    clean_parts,
    hit_lines,
    make_finder,
    make_line_literals,
    shorten,
)
from shmguard.units import (
    KiB,
    SizeError,
    k8s_quantity_bytes,
    parse_docker_size,
    parse_tmpfs_size,
)

#: Evidence lines kept per signature (the first ones, plus the last one seen).
KEEP_EVIDENCE = 5


def read_unit(text: str, unit: str) -> int | None:
    """Bytes of a captured size, or None when it does not parse.

    Units: ``bytes`` (an integer), ``kib`` (an integer of KiB), ``df`` (``df -h`` output such
    as ``64M``/``1.0G``, binary, or a bare KiB count as ``df -k`` prints), ``k8s`` (a quantity,
    ``1Gi``), ``docker`` (go-units, ``2g``), ``size`` (lenient: go-units as Docker <= 20.10
    read it, so ``2Gi``, ``2gb`` and ``64MB`` are binary sizes), ``tmpfs`` (kernel ``size=``,
    ``65536k``), ``gb`` (decimal gigabytes as Ray prints them, ``15.03``). ``text`` is never a size.
    """
    t = text.strip().strip("\"'")
    try:
        if unit == "bytes":
            return int(t)
        if unit == "kib":
            return int(t) * KiB
        if unit == "df":
            if t.isdigit():
                return int(t) * KiB
            return parse_docker_size(t)
        if unit == "k8s":
            return k8s_quantity_bytes(t)
        if unit == "docker":
            return parse_docker_size(t)
        if unit == "size":
            # What the writer most likely meant: old go-units, which also reads 2Gi and 64MB
            # (binary).
            return parse_docker_size(t, legacy=True)
        if unit == "tmpfs":
            return parse_tmpfs_size(t) or None
        if unit == "gb":
            return int(float(t) * 1e9)
    except (SizeError, ValueError, OverflowError):
        return None
    return None


@dataclass(frozen=True)
class RuntimeMark:
    """The first line of one kind of runtime marker (a pattern whose match, or whose
    signature, names a runtime): the runtime, the line, the pattern's confidence and where it
    was seen (input index, line)."""

    runtime: str
    evidence: Evidence
    confidence: str
    where: tuple[int, int]


@dataclass
class Tally:
    """What one signature matched so far (bounded: :data:`KEEP_EVIDENCE` lines + the last).

    ``matches`` counts distinct lines; ``patterns`` counts matches per pattern name;
    ``runtime_marks`` keeps the first line of each pattern that points to a runtime (at most
    one per pattern, so a marker repeated on every line counts as one kind).
    """

    signature: Signature
    matches: int = 0
    first: list[Evidence] = field(default_factory=list)
    last: Evidence | None = None
    patterns: dict[str, int] = field(default_factory=dict)
    captures: dict[str, tuple[int, Evidence]] = field(default_factory=dict)
    runtime_marks: dict[str, RuntimeMark] = field(default_factory=dict)
    first_pos: tuple[int, int] | None = None  # (input index, line)
    _last_where: tuple[int, int] | None = None

    def add(self, ev: Evidence, pat: Pattern, input_index: int, sizes: dict[str, int]) -> None:
        self.patterns[pat.name] = self.patterns.get(pat.name, 0) + 1
        for name, value in sizes.items():
            self.captures.setdefault(name, (value, ev))
        rt = pat.runtime or self.signature.runtime
        if rt is not None and pat.name not in self.runtime_marks:
            conf = pat.confidence or self.signature.confidence
            self.runtime_marks[pat.name] = RuntimeMark(rt, ev, conf, (input_index, ev.line))
        where = (input_index, ev.line)
        if where == self._last_where:
            return  # another wording variant on the same line: one evidence line
        self._last_where = where
        self.matches += 1
        if len(self.first) < KEEP_EVIDENCE:
            self.first.append(ev)
        else:
            self.last = ev
        if self.first_pos is None:
            self.first_pos = where

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """The kept evidence lines in order."""
        return (*self.first, *((self.last,) if self.last is not None else ()))


class Matcher:
    """Runs a catalogue over inputs; :meth:`feed` one input at a time, then read
    :attr:`tallies` (signature id -> :class:`Tally`), :attr:`inputs` and :attr:`loader` (the
    DataLoader parameters the lines show, :mod:`shmguard.triage.loader_seen`: the lines that
    hold one of its literals are read there too)."""

    def __init__(self, signatures: Sequence[Signature], *, backend: str = "auto") -> None:
        self.signatures = tuple(signatures)
        literals: dict[bytes, list[tuple[Signature, Pattern]]] = {}
        for s in self.signatures:
            for p in s.patterns:
                literals.setdefault(p.literal, []).append((s, p))
        for lit in LOADER_LITERALS:
            literals.setdefault(lit, [])
        self._loader_literals = frozenset(LOADER_LITERALS)
        self.loader = LoaderSeen()
        # Markers first, so a marker and its target on one line work.
        self._by_literal = [
            (lit, sorted(pairs, key=lambda sp: not sp[1].marker)) for lit, pairs in literals.items()
        ]
        self._overlap = max((len(lit) for lit in literals), default=0) + 64
        self._find, self.backend = make_finder(list(literals), backend=backend)
        self._present = make_line_literals(list(literals), self.backend)
        self.tallies: dict[str, Tally] = {}
        self.inputs: list[tuple[str, int, int, bool]] = []  # name, bytes, lines, binary

    def reset(self) -> None:
        """Forget every input and match, keeping the compiled pre-filter (building it costs
        about 5 ms with Aho-Corasick), so one matcher can diagnose many inputs one by one."""
        self.tallies = {}
        self.inputs = []
        self.loader.reset()

    def feed(self, name: str, stream: BinaryIO) -> None:
        """Match every line of ``stream`` (binary). Memory stays bounded whatever its size."""
        index = len(self.inputs)
        markers: dict[str, tuple[str, int]] = {}  # signature id -> its latest marker, line
        seen: set[tuple[str, str, int]] = set()
        last_line_seen = 0
        reader = BlockReader(stream, self._overlap)
        try:
            for block in reader:
                offsets = self._find(block.data, block.start, block.stop)
                if not offsets:
                    continue
                for hit in hit_lines(block.data, block.line, offsets, block.start, block.stop):
                    if hit.line != last_line_seen:
                        # Dedupe memory only needs the current line (pieces of one long line).
                        seen.clear()
                        last_line_seen = hit.line
                    self._line(name, index, hit.line, hit.raw, markers, seen)
        finally:  # an interrupted read is summed up too: a partial diagnosis names it
            self.inputs.append((name, reader.bytes_read, reader.lines, reader.binary))

    def _line(
        self,
        name: str,
        index: int,
        line: int,
        raw: bytes,
        markers: dict[str, tuple[str, int]],
        seen: set[tuple[str, str, int]],
    ) -> None:
        parts: list[str] | None = None
        if self._present is not None:
            held = [self._by_literal[i] for i in self._present(raw)]
        else:
            held = [(lit, pairs) for lit, pairs in self._by_literal if lit in raw]
        if any(lit in self._loader_literals for lit, _pairs in held):
            parts = clean_parts(raw)
            self.loader.add(name, line, " ".join(parts))
        for _lit, pairs in held:
            if parts is None:
                parts = clean_parts(raw)
            for sig, pat in pairs:
                key = (sig.id, pat.name, line)
                if key in seen:
                    continue
                if pat.after is not None:
                    latest = markers.get(sig.id)
                    if (
                        latest is None
                        or latest[0] != pat.after
                        or not 0 <= line - latest[1] <= pat.within
                    ):
                        continue
                m = None
                text = parts[0]
                for text in parts:
                    m = pat.regex.search(text)
                    if m is not None:
                        break
                if m is None:
                    continue
                seen.add(key)
                if pat.marker:
                    markers[sig.id] = (pat.name, line)
                    continue
                groups = {k: v for k, v in m.groupdict().items() if v is not None}
                sizes: dict[str, int] = {}
                for group, unit in pat.units:
                    if group in groups and unit != "text":
                        value = read_unit(groups[group], unit)
                        if value is not None and 0 < value < 1 << 62:
                            sizes[group] = value
                ev = Evidence(
                    file=name,
                    line=line,
                    text=shorten(text, m.start(), m.end()),
                    pattern=pat.name,
                    captures=groups,
                )
                tally = self.tallies.get(sig.id)
                if tally is None:
                    tally = self.tallies[sig.id] = Tally(sig)
                tally.add(ev, pat, index, sizes)


def match_all(
    signatures: Sequence[Signature],
    inputs: Iterable[tuple[str, BinaryIO]],
    *,
    backend: str = "auto",
) -> Matcher:
    """Feed every ``(name, binary stream)`` to one :class:`Matcher` and return it."""
    m = Matcher(signatures, backend=backend)
    for name, stream in inputs:
        m.feed(name, stream)
    return m

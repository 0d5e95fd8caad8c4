"""Stream a log in constant memory and find the lines that contain a catalogue literal.

The input is read in blocks of :data:`BLOCK` bytes cut at the last newline, so memory does not
grow with the file; a line longer than :data:`MAX_CARRY` (a 100 MB single line, binary data)
is cut into pieces that overlap by the longest literal, so no literal is missed at a cut.
Within a block (a slice of the read, not a copy) a multi-literal search (a few Aho-Corasick
automatons from ``ahocorasick_rs`` when installed, else one ``bytes.find`` pass per literal)
finds candidate positions; only the lines around them are decoded and given to the regular
expressions. Decoding is lossless for valid UTF-8 and replaces invalid bytes; NUL bytes, ANSI
colour codes and CR are removed first. A log that starts with a UTF-16 byte-order mark
(Windows PowerShell's ``>`` writes UTF-16LE) is recoded to UTF-8 as it streams; a UTF-8
byte-order mark is dropped.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

#: Bytes read at a time.
BLOCK = 1 << 20
#: A partial line longer than this is processed in pieces (bounded memory).
MAX_CARRY = 1 << 20
#: Bytes of a line, either side of a hit, given to the regular expressions.
WINDOW = 4096
#: Most literals per Aho-Corasick automaton (see literal_groups).
AC_GROUP = 48
#: Bytes of each literal the Teddy prefilter fingerprints, at most (see literal_groups).
TEDDY_MASK = 4
#: Longest evidence text kept for display.
EVIDENCE_CHARS = 400

# ECMA-48 CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks); neither
# spans a newline, so removing them never changes line numbers.
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")
# Other C0 control characters (a stray ESC, BEL, backspace...) except tab are dropped from
# evidence text; CR is handled separately (progress-bar redraws).
_CONTROLS = {c: None for c in range(32) if c not in (9, 13)}
_CONTROLS[127] = None


class _Finder(Protocol):
    def __call__(self, block: bytes, start: int = 0, stop: int | None = None) -> list[int]: ...


def minimal_literals(literals: Sequence[bytes]) -> list[bytes]:
    """The literals that contain no other literal, sorted.

    Every occurrence of a literal that contains another holds an occurrence of the shorter
    one, so searching for the minimal ones finds every line that holds any literal
    (``torch/utils/data/`` covers ``torch/utils/data/_utils/worker.py``, ``Bus error`` covers
    `` Bus error``): fewer needles, the same lines.
    """
    lits = sorted(set(literals), key=lambda b: (len(b), b))
    kept: list[bytes] = []
    for lit in lits:
        if not any(k in lit for k in kept):
            kept.append(lit)
    return sorted(kept)


def literal_groups(literals: Sequence[bytes], size: int = AC_GROUP) -> list[list[bytes]]:
    """:func:`minimal_literals` cut into the groups of one Aho-Corasick automaton each.

    Literals shorter than :data:`TEDDY_MASK` bytes form a group of their own; the others,
    sorted (so literals with a common start share a Teddy bucket), are cut into
    ``ceil(n / size)`` runs of nearly equal length. Why: the ``aho-corasick`` crate's Teddy
    prefilter takes at most 64 literals, fingerprints the first ``min(4, shortest literal)``
    bytes of each, and uses its 16-bucket AVX2 variant above 32 literals
    (``src/packed/teddy/builder.rs`` in BurntSushi/aho-corasick 1.1). Measured on the 2-core
    development machine with the 204 catalogue literals (165 minimal): four groups of ~41
    search 1.0-1.1 GB/s of the throughput benchmark's log and 0.8 GB/s of Python source,
    the former seven groups of 32 over all literals 0.8 and 0.4, a single automaton 0.27 (as a
    DFA 0.59).
    """
    lits = minimal_literals(literals)
    short = [lit for lit in lits if len(lit) < TEDDY_MASK]
    rest = [lit for lit in lits if len(lit) >= TEDDY_MASK]
    groups = [short] if short else []
    if rest:
        n = -(-len(rest) // size)
        q, r = divmod(len(rest), n)
        cuts = [i * q + min(i, r) for i in range(n + 1)]  # the first r runs get one more
        groups += [rest[a:b] for a, b in itertools.pairwise(cuts)]
    return groups


def make_finder(literals: Sequence[bytes], *, backend: str = "auto") -> tuple[_Finder, str]:
    """A function ``(block, start=0, stop=None) -> sorted offsets into block`` that finds
    every line of ``block[start:stop]`` holding a literal, and the name of the backend used
    (``ac`` or ``find``).

    An offset is where a literal starts, or a literal contained in it
    (:func:`minimal_literals`); overlapping and repeated occurrences may be left out, so
    callers re-check every literal on the hit lines.

    Args:
        literals: non-empty byte strings.
        backend: ``auto`` (Aho-Corasick if ``ahocorasick_rs`` imports), ``ac`` or ``find``.

    Raises:
        ValueError: unknown backend, or ``ac`` requested and ``ahocorasick_rs`` missing.
    """
    if backend not in ("auto", "ac", "find"):
        raise ValueError(f"unknown pre-filter backend {backend!r}")
    if backend in ("auto", "ac"):
        try:
            import ahocorasick_rs
        except ImportError:
            if backend == "ac":
                raise ValueError("the 'ac' pre-filter needs the ahocorasick-rs package") from None
        else:
            # Leftmost-first automatons (see literal_groups): the Rust crate then uses its
            # SIMD "Teddy" prefilter. Non-overlapping matches are enough: every line that
            # holds a literal yields at least one hit, and hit lines are re-checked in full.
            # The block is searched through a memoryview: no copy of it is made.
            kind = ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
            acs = [
                ahocorasick_rs.BytesAhoCorasick(group, matchkind=kind)
                for group in literal_groups(literals)
            ]

            def find_ac(block: bytes, start: int = 0, stop: int | None = None) -> list[int]:
                with memoryview(block) as whole, whole[start:stop] as view:
                    out = [m[1] for ac in acs for m in ac.find_matches_as_indexes(view)]
                if start:
                    out = [o + start for o in out]
                if len(acs) > 1:
                    out.sort()
                return out

            return find_ac, "ac"

    lits = minimal_literals(literals)

    def find_each(block: bytes, start: int = 0, stop: int | None = None) -> list[int]:
        end = len(block) if stop is None else stop
        out: list[int] = []
        for lit in lits:
            pos = block.find(lit, start, end)
            while pos != -1:
                out.append(pos)
                pos = block.find(lit, pos + 1, end)
        out.sort()
        return out

    return find_each, "find"


def make_line_literals(
    literals: Sequence[bytes], backend: str
) -> Callable[[bytes], list[int]] | None:
    """For the ``ac`` backend, a function ``line -> sorted indexes into literals`` of every
    literal the line contains (overlapping matches, one Aho-Corasick pass in Rust), so a hit
    line is checked only against the literals it holds instead of all ~200 of them: a log
    where most lines hold a literal (``ls -l /dev/shm``, NCCL INFO output) was 5x slower
    without it. None for the ``find`` backend (callers test each literal with ``in``)."""
    if backend != "ac":
        return None
    import ahocorasick_rs

    ac = ahocorasick_rs.BytesAhoCorasick(
        list(literals), matchkind=ahocorasick_rs.MATCHKIND_STANDARD
    )

    def present(line: bytes) -> list[int]:
        return sorted({m[0] for m in ac.find_matches_as_indexes(line, overlapping=True)})

    return present


@dataclass(frozen=True)
class HitLine:
    """A line (or the window of a very long line) that contains at least one literal.

    ``raw`` is the bytes window (for the literal checks), ``line`` is 1-based.
    """

    line: int
    raw: bytes


def clean(raw: bytes) -> str:
    """Bytes of one line -> text for the regular expressions: invalid UTF-8 replaced, NUL
    and other control characters (but tab) removed; of CR-separated redraws (progress bars)
    the last non-empty part."""
    return clean_parts(raw)[0]


def clean_parts(raw: bytes) -> list[str]:
    """Like :func:`clean`, but every non-empty CR-separated part of the line, last first.

    A terminal shows only the last redraw, but a log keeps all of them: an error printed
    without a newline before a progress bar redraws (``...Bus error.\\r 45%|###``) is in an
    earlier part, and must still be matched. Never empty (``[""]`` for a blank line).
    """
    text = raw.decode("utf-8", "replace").translate(_CONTROLS)
    if "\r" not in text:
        return [text]
    parts = [p for p in text.split("\r") if p.strip()]
    parts.reverse()
    return parts or [""]


def shorten(text: str, start: int, end: int, limit: int = EVIDENCE_CHARS) -> str:
    """The text around ``text[start:end]``, at most ``limit`` characters, stripped."""
    text_s = text.strip()
    if len(text_s) <= limit:
        return text_s
    mid = (start + end) // 2
    lo = max(0, min(mid - limit // 2, len(text) - limit))
    piece = text[lo : lo + limit].strip()
    return ("…" if lo > 0 else "") + piece + ("…" if lo + limit < len(text) else "")


def looks_utf16(head: bytes) -> bool:
    """True when ``head`` (the start of an input) is UTF-16 text: a byte-order mark followed
    by mostly ASCII code units (one byte zero, the other not), at least 4 of them. Binary
    data that merely starts with FF FE stays bytes."""
    if head.startswith(codecs.BOM_UTF16_LE):
        zero, other = 1, 0
    elif head.startswith(codecs.BOM_UTF16_BE):
        zero, other = 0, 1
    else:
        return False
    body = head[2:4098]
    units = [body[i : i + 2] for i in range(0, len(body) - 1, 2)]
    if len(units) < 4:
        return False
    ascii_units = sum(1 for u in units if u[zero] == 0 and u[other] != 0)
    return ascii_units * 4 >= len(units) * 3


@dataclass(frozen=True)
class Block:
    """Whole lines of an input: ``data[start:stop]`` (a slice of one read, not copied).

    ``line`` is the 1-based number of its first line; ``continues`` says it continues a line
    begun in an earlier block (the pieces of a very long line).
    """

    data: bytes
    start: int
    stop: int
    line: int
    continues: bool = False


class BlockReader:
    """Iterate over the :class:`Block` objects of a binary stream.

    Each read of :data:`BLOCK` bytes gives at most two blocks: the line left unfinished by the
    previous read joined to its end in this one (a copy of one line), then the whole lines
    after it, up to the last newline, as a slice of the read itself; the unfinished last line
    is carried to the next read. After iteration, :attr:`bytes_read`, :attr:`lines` and
    :attr:`binary` describe the input.
    """

    def __init__(self, stream: BinaryIO, overlap: int) -> None:
        self.stream = stream
        self.overlap = overlap
        self.bytes_read = 0
        self.lines = 0
        self.binary = False
        self.encoding = "utf-8"
        self._sniffed = False
        self._decoder: codecs.IncrementalDecoder | None = None

    def _recode(self, data: bytes, first: bool) -> bytes:
        """UTF-16 (with a byte-order mark: Windows PowerShell's ``>``) -> UTF-8, block by
        block; a UTF-8 byte-order mark at the start is dropped."""
        if first:
            if looks_utf16(data):
                self.encoding = "utf-16"
                self._decoder = codecs.getincrementaldecoder("utf-16")("replace")
            elif data.startswith(codecs.BOM_UTF8):
                data = data[len(codecs.BOM_UTF8) :]
        if self._decoder is not None:
            return self._decoder.decode(data).encode("utf-8", "replace")
        return data

    def _sniff(self, data: bytes) -> None:
        # Text logs have almost no control bytes; a NUL or two (torch's SIGBUS line) is fine.
        sample = data[:65536]
        ctrl = sum(sample.count(bytes([c])) for c in (0, 1, 2, 3, 4, 5, 6, 14, 15, 16, 17))
        self.binary = len(sample) > 0 and ctrl * 100 > len(sample)
        self._sniffed = True

    def __iter__(self) -> Iterator[Block]:
        carry = b""
        carry_mid = False  # carry itself continues an earlier line
        line_base = 1
        # read1: what a pipe holds now, up to a block, rather than waiting for a whole block
        # (``kubectl logs -f``: the lines so far are matched, and an interrupt keeps them)
        read = getattr(self.stream, "read1", self.stream.read)
        while True:
            data = read(BLOCK)
            if not data:
                break
            self.bytes_read += len(data)
            data = self._recode(data, not self._sniffed)
            if not self._sniffed:
                self._sniff(data)
            if not data:
                continue
            first = data.find(b"\n")
            if first == -1:
                buf = carry + data
                if len(buf) <= MAX_CARRY:
                    carry = buf
                    continue
                # A very long line: hand over all but an overlap, keep the overlap.
                yield _block(buf, 0, len(buf), line_base, carry_mid)
                carry = buf[-self.overlap :] if self.overlap else b""
                carry_mid = True
                continue
            start = 0
            if carry:
                # The unfinished line, completed: a copy of one line, not of the read.
                yield _block(carry + data[: first + 1], 0, None, line_base, carry_mid)
                line_base += 1
                start = first + 1
            cut = data.rfind(b"\n") + 1
            if cut > start:
                yield _block(data, start, cut, line_base, False)
                line_base += data.count(b"\n", start, cut)
            self.lines = line_base - 1  # the whole lines so far (an interrupted read shows it)
            carry, carry_mid = data[cut:], False
        if carry:
            yield _block(carry, 0, len(carry), line_base, carry_mid)
            self.lines = line_base
        else:
            self.lines = line_base - 1


def _block(data: bytes, start: int, stop: int | None, line: int, continues: bool) -> Block:
    """A :class:`Block` of ``data[start:stop]``, ANSI escape sequences removed (a copy only
    when there are some)."""
    end = len(data) if stop is None else stop
    if data.find(b"\x1b", start, end) != -1:
        with memoryview(data) as whole, whole[start:end] as view:
            data = _ANSI.sub(b"", view)
        start, end = 0, len(data)
    return Block(data, start, end, line, continues)


def hit_lines(
    block: bytes, line_base: int, offsets: Sequence[int], start: int = 0, stop: int | None = None
) -> Iterator[HitLine]:
    """The distinct lines of ``block[start:stop]`` (whose first line is number ``line_base``)
    holding the hit ``offsets`` (sorted, into ``block``), each bounded to :data:`WINDOW` bytes
    either side of its first and last hit."""
    end_all = len(block) if stop is None else stop
    i = 0
    n = len(offsets)
    counted_to = start
    line = line_base
    while i < n:
        h = offsets[i]
        line_start = block.rfind(b"\n", start, h) + 1 or start
        end = block.find(b"\n", h, end_all)
        if end == -1:
            end = end_all
        line += block.count(b"\n", counted_to, line_start)
        counted_to = line_start
        last = h
        while i < n and offsets[i] < end:
            last = offsets[i]
            i += 1
        lo = max(line_start, h - WINDOW)
        hi = min(end, last + WINDOW)
        yield HitLine(line, block[lo:hi])

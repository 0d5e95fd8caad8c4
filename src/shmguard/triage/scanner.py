"""Stream a log in constant memory and find the lines that contain a catalogue literal.

The input is read in blocks of :data:`BLOCK` bytes cut at the last newline, so memory does not
grow with the file; a line longer than :data:`MAX_CARRY` (a 100 MB single line, binary data)
is cut into pieces that overlap by the longest literal, so no literal is missed at a cut.
Within a block a multi-literal search (Aho-Corasick from ``ahocorasick_rs`` when installed,
else one ``bytes.find`` pass per literal) finds candidate positions; only the lines around
them are decoded and given to the regular expressions. Decoding is lossless for valid UTF-8
and replaces invalid bytes; NUL bytes, ANSI colour codes and CR are removed first. A log that
starts with a UTF-16 byte-order mark (Windows PowerShell's ``>`` writes UTF-16LE) is recoded
to UTF-8 as it streams; a UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

import codecs
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
#: Literals per Aho-Corasick automaton (see make_finder).
AC_GROUP = 32
#: Longest evidence text kept for display.
EVIDENCE_CHARS = 400

# ECMA-48 CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks).
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# Other C0 control characters (a stray ESC, BEL, backspace...) except tab are dropped from
# evidence text; CR is handled separately (progress-bar redraws).
_CONTROLS = {c: None for c in range(32) if c not in (9, 13)}
_CONTROLS[127] = None


class _Finder(Protocol):
    def __call__(self, block: bytes) -> list[int]: ...


def make_finder(literals: Sequence[bytes], *, backend: str = "auto") -> tuple[_Finder, str]:
    """A function ``block -> sorted start offsets`` of any literal (possibly not all
    overlapping ones: callers re-check every literal on the hit lines), and the name of the
    backend used (``ac`` or ``find``).

    Args:
        literals: non-empty byte strings.
        backend: ``auto`` (Aho-Corasick if ``ahocorasick_rs`` imports), ``ac`` or ``find``.

    Raises:
        ValueError: unknown backend, or ``ac`` requested and ``ahocorasick_rs`` missing.
    """
    lits = sorted(set(literals))
    if backend not in ("auto", "ac", "find"):
        raise ValueError(f"unknown pre-filter backend {backend!r}")
    if backend in ("auto", "ac"):
        try:
            import ahocorasick_rs
        except ImportError:
            if backend == "ac":
                raise ValueError("the 'ac' pre-filter needs the ahocorasick-rs package") from None
        else:
            # Leftmost-first automatons of at most AC_GROUP literals each: the Rust crate then
            # uses its SIMD "Teddy" prefilter (GB/s); one automaton of ~100 literals does not
            # (~250 MB/s, measured here). Non-overlapping matches are enough: every line that
            # holds a literal yields at least one hit, and hit lines are re-checked in full.
            kind = ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
            acs = [
                ahocorasick_rs.BytesAhoCorasick(lits[i : i + AC_GROUP], matchkind=kind)
                for i in range(0, len(lits), AC_GROUP)
            ]

            def find_ac(block: bytes) -> list[int]:
                out = [m[1] for ac in acs for m in ac.find_matches_as_indexes(block)]
                if len(acs) > 1:
                    out.sort()
                return out

            return find_ac, "ac"

    def find_each(block: bytes) -> list[int]:
        out: list[int] = []
        for lit in lits:
            pos = block.find(lit)
            while pos != -1:
                out.append(pos)
                pos = block.find(lit, pos + 1)
        out.sort()
        return out

    return find_each, "find"


def make_line_literals(
    literals: Sequence[bytes], backend: str
) -> Callable[[bytes], list[int]] | None:
    """For the ``ac`` backend, a function ``line -> sorted indexes into literals`` of every
    literal the line contains (overlapping matches, one Aho-Corasick pass in Rust), so a hit
    line is checked only against the literals it holds instead of all ~100 of them: a log
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


class BlockReader:
    """Iterate over ``(block, line_base, mid_line_start)`` for a binary stream.

    ``line_base`` is the 1-based number of the block's first line; ``mid_line_start`` says the
    block continues a line begun in an earlier block. After iteration, :attr:`bytes_read`,
    :attr:`lines` and :attr:`binary` describe the input.
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

    def __iter__(self) -> Iterator[tuple[bytes, int, bool]]:
        carry = b""
        carry_mid = False  # carry itself continues an earlier line
        line_base = 1
        while True:
            data = self.stream.read(BLOCK)
            if not data:
                break
            self.bytes_read += len(data)
            data = self._recode(data, not self._sniffed)
            if not self._sniffed:
                self._sniff(data)
            if not data:
                continue
            buf = carry + data if carry else data
            cut = buf.rfind(b"\n")
            if cut == -1:
                if len(buf) <= MAX_CARRY:
                    carry = buf
                    continue
                # A very long line: hand over all but an overlap, keep the overlap.
                piece, carry = buf, buf[-self.overlap :] if self.overlap else b""
                yield _strip(piece), line_base, carry_mid
                carry_mid = True
                continue
            block, carry = buf[: cut + 1], buf[cut + 1 :]
            yield _strip(block), line_base, carry_mid
            line_base += block.count(b"\n")
            carry_mid = False
        if carry:
            yield _strip(carry), line_base, carry_mid
            self.lines = line_base
        else:
            self.lines = line_base - 1


def _strip(block: bytes) -> bytes:
    if b"\x1b" in block:
        return _ANSI.sub(b"", block)
    return block


def hit_lines(block: bytes, line_base: int, offsets: Sequence[int]) -> Iterator[HitLine]:
    """The distinct lines of ``block`` holding the hit ``offsets`` (sorted), each bounded to
    :data:`WINDOW` bytes either side of its first and last hit."""
    i = 0
    n = len(offsets)
    counted_to = 0
    line = line_base
    while i < n:
        h = offsets[i]
        start = block.rfind(b"\n", 0, h) + 1
        end = block.find(b"\n", h)
        if end == -1:
            end = len(block)
        line += block.count(b"\n", counted_to, start)
        counted_to = start
        last = h
        while i < n and offsets[i] < end:
            last = offsets[i]
            i += 1
        lo = max(start, h - WINDOW)
        hi = min(end, last + WINDOW)
        yield HitLine(line, block[lo:hi])

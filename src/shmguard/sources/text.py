"""A file's bytes and text, with character <-> byte offset conversion.

PyYAML (both its C composer over libyaml and the pure-Python one) reports marks as *character*
indexes into the decoded text (measured: ``'a: héllo'`` gives the same indexes for ``str`` and
``bytes`` input, and a leading BOM is not counted). A :class:`~shmguard.model.finding.Edit`
needs *byte* offsets into the file as read, so every source converts through
:meth:`SourceText.byte_offset`. Pure-ASCII files (most of them) convert for free.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic

#: Largest file read (bytes). The biggest file of ../shared/corpus is a 1.2 MB CRD bundle;
#: configs past this are generated dumps, and reading them would hold the run up.
MAX_BYTES = 16 * 1024 * 1024
#: Bytes inspected for a NUL to call a file binary (git's heuristic uses the first 8000).
BINARY_PROBE = 8000

_BOM = b"\xef\xbb\xbf"
#: UTF-16 byte-order marks (Windows PowerShell's ``>`` and Notepad's "Unicode" write UTF-16LE).
_UTF16 = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def binary_problem(data: bytes, file: str) -> SourceDiagnostic | None:
    """A ``binary`` diagnostic when ``data`` (a file's start) has a NUL in its first
    :data:`BINARY_PROBE` bytes and is no UTF-16 text (a byte-order mark), else None."""
    if data[:2] in _UTF16 or b"\x00" not in data[:BINARY_PROBE]:
        return None
    msg = "binary file (contains NUL bytes); not read"
    return SourceDiagnostic(file, None, None, msg, DiagnosticKind.BINARY)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_NEWLINE = re.compile(b"\n")


@dataclass(frozen=True)
class SourceText:
    """The original bytes of a file, its decoded text and the offsets needed to map between them.

    Attributes:
        file: the path as given.
        data: the bytes as read (edits apply to these); a UTF-16 file's text re-encoded as
            UTF-8 (``encoding`` says how to write it back: :meth:`encoded`).
        text: ``data`` decoded as UTF-8, without a leading BOM.
        bias: bytes before ``text`` starts (3 with a BOM, else 0).
        encoding: ``utf-8``, or ``utf-16-le`` / ``utf-16-be`` for a file that starts with that
            byte-order mark.
    """

    file: str
    data: bytes
    text: str
    bias: int = 0
    encoding: str = "utf-8"
    _wide: list[int] = field(default_factory=list, repr=False)
    _extra: list[int] = field(default_factory=list, repr=False)
    #: Byte offsets where each line of :attr:`data` starts, built on first use.
    _lines: list[int] = field(default_factory=list, repr=False)
    #: Byte offsets of the characters at :attr:`_wide`, built on first use.
    _wide_bytes: list[int] = field(default_factory=list, repr=False)

    @classmethod
    def decode(cls, data: bytes, file: str) -> SourceText | SourceDiagnostic:
        """Decode ``data``; a diagnostic for a file over :data:`MAX_BYTES`, a binary file (NUL
        in the first :data:`BINARY_PROBE` bytes) or invalid UTF-8 (with the bad byte's line and
        column). UTF-16 with a byte-order mark is decoded and held as UTF-8 (invalid UTF-16:
        ``not-utf8``, naming the encoding)."""
        if len(data) > MAX_BYTES:
            return SourceDiagnostic(
                file,
                None,
                None,
                f"file is {len(data):,} bytes, over the {MAX_BYTES:,}-byte limit; not read",
                DiagnosticKind.TOO_LARGE,
            )
        encoding = _UTF16.get(data[:2])
        if encoding is not None:
            try:
                data = data[2:].decode(encoding).encode("utf-8")
            except UnicodeError as e:
                msg = f"not valid {encoding.upper()}: {e}"
                return SourceDiagnostic(file, None, None, msg, DiagnosticKind.NOT_UTF8)
        problem = binary_problem(data, file)
        if problem is not None:
            return problem
        bias = 3 if data.startswith(_BOM) else 0
        try:
            text = data[bias:].decode("utf-8")
        except UnicodeDecodeError as e:
            pos = bias + e.start
            line = data.count(b"\n", 0, pos) + 1
            col = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
            return SourceDiagnostic(
                file,
                line,
                col,
                f"not UTF-8: byte 0x{data[pos]:02x} at offset {pos} ({e.reason})",
                DiagnosticKind.NOT_UTF8,
            )
        src = cls(file, data, text, bias, encoding or "utf-8")
        if not text.isascii():
            extra = 0
            for m in _NON_ASCII.finditer(text):
                o = ord(m.group())
                extra += 1 if o < 0x800 else 2 if o < 0x10000 else 3
                src._wide.append(m.start())
                src._extra.append(extra)
        return src

    def encoded(self, data: bytes) -> bytes:
        """``data`` (this file's bytes as held, edited) in the file's own encoding: a UTF-16
        file is written back as UTF-16 with its byte-order mark."""
        if self.encoding == "utf-8":
            return data
        bom = next(b for b, e in _UTF16.items() if e == self.encoding)
        return bom + data.decode("utf-8").encode(self.encoding)

    def byte_offset(self, index: int) -> int:
        """Byte offset in :attr:`data` of character ``index`` of :attr:`text`."""
        if not self._wide:
            return index + self.bias
        k = bisect.bisect_left(self._wide, index)
        return index + self.bias + (self._extra[k - 1] if k else 0)

    def char_index(self, offset: int) -> int:
        """Character index in :attr:`text` of byte ``offset`` of :attr:`data` (the inverse of
        :meth:`byte_offset` at character boundaries). O(log n): a bisect over the byte offsets
        of the file's non-ASCII characters, not a decode from the start."""
        offset = min(max(offset, self.bias), len(self.data))
        if not self._wide:
            return offset - self.bias
        if not self._wide_bytes:
            self._wide_bytes.extend(self.byte_offset(i) for i in self._wide)
        k = bisect.bisect_left(self._wide_bytes, offset)  # wide characters before offset
        return offset - self.bias - (self._extra[k - 1] if k else 0)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and 1-based character column of byte ``offset``. O(log n): a bisect
        over the line starts, indexed once per file (a finding on each of 40,000 run lines
        used to count newlines from the start of the file for each)."""
        if not self._lines:
            self._lines.append(0)
            self._lines.extend(m.end() for m in _NEWLINE.finditer(self.data))
        line = bisect.bisect_right(self._lines, offset)  # lines starting at or before offset
        start = max(self._lines[line - 1], self.bias)
        col = self.char_index(offset) - self.char_index(start) + 1 if offset > start else 1
        return line, col

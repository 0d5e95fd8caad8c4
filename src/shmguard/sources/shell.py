"""A POSIX-shell word splitter that keeps positions: the words of each simple command.

Why not a library: bashlex 0.18 failed on 33 of the 334 command lines of
../shared/corpus/docker_run_lines.tsv (Makefile ``$(...)`` with ``else``, lines that run into a
comment, ``<PLACEHOLDER>`` read as a redirection, kept as text here) and gives no byte
offsets after decoding;
``shlex.split`` parses 329 of them but gives no positions at all. This splitter follows
``shlex`` in POSIX mode for quoting (its words equal ``shlex.split``'s on the corpus lines,
tests/sources/test_shell.py) and adds what a linter needs: the span of every word in the
file, command boundaries (``;`` ``&`` ``|`` ``&&`` ``||`` newline), comments, backslash-newline
continuations, redirections skipped, here-document bodies skipped (they are input, not
commands), array assignments ``NAME=(a b c)`` kept as one word (their elements are
:func:`array_elements`), and ``$(...)`` / backtick bodies parsed as commands too.

Quoting rules (POSIX.1-2017 XCU 2.2): backslash escapes the next character outside quotes
(``\\<newline>`` is removed); single quotes are literal; inside double quotes a backslash
escapes only ``$ ` " \\`` and newline; ``$'...'`` (bash) takes C escapes, kept verbatim here.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

#: The first characters of the operators ``&& || ;; ; & | ( )``.
_OPERATOR_START = ";&|()"
_SPACE = " \t"
_BREAK = " \t\n;&|()<>"
#: ``<YOUR_TOKEN>``-style documentation placeholders, also of several words on one line
#: (``-v <path to imagenet>:/imagenet``): kept as literal text, not redirections.
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w./:-]*(?: [\w./:-]+)*>")
#: The start of an array assignment's word: ``NAME=(`` or ``NAME+=(``.
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
#: A here-document operator and its delimiter word (``<<EOF``, ``<<-'EOF'``, ``<< "END"``).
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|()<>]+))")
#: A run of characters that a word takes as they are (no quote, escape, expansion, break).
_PLAIN = re.compile(r"[^ \t\n\r;&|()<>\\'\"$`]+")


@dataclass(frozen=True, slots=True)  # slots: a 7 MB run line has 1.2M words
class Word:
    """One shell word: ``value`` after quote removal, ``start``/``end`` character offsets of
    its source text (``raw``) in the text given to :func:`split_commands`.

    After :meth:`shmguard.sources.shellvars.ShellVars.expand`: ``unresolved`` names the
    expansions in it that the file does not assign (``$EXTRA_MOUNTS``, ``${1}``, ``$(cmd)``,
    as written), and ``bare`` is True when the word is only one such expansion, unquoted
    (it may stand for any number of words)."""

    value: str
    start: int
    end: int
    raw: str
    unresolved: tuple[str, ...] = ()
    bare: bool = False


class Words(Sequence[Word]):
    """The words of one simple command, held compactly: a 7 MB run line has 1.56M words, and
    a :class:`Word` object each, with its strings, cost about 120 bytes. Each word's span is
    an entry of an array of ints and its source text is ``text[start:end]``; a value that
    differs from it (quotes removed) is kept in a list, made at the first such word; only a
    word that records an expansion, or whose text is not its span of :attr:`text` (a word a
    source made up), is kept whole. Indexing builds the :class:`Word`; :meth:`value`,
    :meth:`raw`, :meth:`start` and :meth:`end` read one field of word ``k``
    (``0 <= k < len``) without building it."""

    __slots__ = ("_spans", "_values", "_whole", "text")

    def __init__(self, text: str, words: Iterable[Word] = ()) -> None:
        self.text = text
        #: start and end of word k at 2k and 2k + 1 (4 bytes each below 2**31 characters)
        self._spans = array("i" if len(text) < 2**31 else "q")
        #: each word's value when it is not its text, else None; None until one is not
        self._values: list[str | None] | None = None
        #: the words kept whole, by index
        self._whole: dict[int, Word] = {}
        for w in words:
            self.append(w)

    def add(self, start: int, end: int, value: str | None = None) -> None:
        """Append the word ``text[start:end]``, whose value is ``value`` (None: the text)."""
        if value is not None and self._values is None:
            self._values = [None] * len(self)
        if self._values is not None:
            self._values.append(value)
        self._spans.append(start)
        self._spans.append(end)

    def append(self, word: Word) -> None:
        """Append ``word``: its span (and value) unless it records an expansion or its text
        is not its span of :attr:`text`."""
        if word.unresolved or word.bare or not self._is_text(word.raw, word.start, word.end):
            self._whole[len(self)] = word
            self.add(word.start, word.end)
        else:
            self.add(word.start, word.end, None if word.value == word.raw else word.value)

    def _is_text(self, raw: str, start: int, end: int) -> bool:
        return start >= 0 and end - start == len(raw) and self.text.startswith(raw, start)

    def take(self, other: Words, k: int) -> None:
        """Append word ``k`` of ``other`` (the words of the same :attr:`text`)."""
        w = other._whole.get(k)
        if w is not None:
            self._whole[len(self)] = w
        self.add(other._spans[2 * k], other._spans[2 * k + 1], other._value(k))

    def _value(self, k: int) -> str | None:
        return self._values[k] if self._values is not None else None

    def mentions(self, chars: str) -> bool:
        """Whether the source text of a word may hold one of ``chars`` (False: none does;
        True also when one lies between words, in a comment). One scan of the text."""
        if any(c in w.raw for w in self._whole.values() for c in chars):
            return True
        if not self._spans:
            return False
        lo, hi = min(self._spans), max(self._spans)
        return any(self.text.find(c, lo, hi) >= 0 for c in chars)

    def value(self, k: int) -> str:
        w = self._whole.get(k)
        if w is not None:
            return w.value
        v = self._values[k] if self._values is not None else None
        return v if v is not None else self.text[self._spans[2 * k] : self._spans[2 * k + 1]]

    def raw(self, k: int) -> str:
        w = self._whole.get(k)
        return w.raw if w is not None else self.text[self._spans[2 * k] : self._spans[2 * k + 1]]

    def start(self, k: int) -> int:
        return self._spans[2 * k]

    def end(self, k: int) -> int:
        return self._spans[2 * k + 1]

    def whole(self, k: int) -> Word | None:
        """Word ``k`` when it is kept whole (see the class doc), else None."""
        return self._whole.get(k)

    def plain(self, k: int) -> bool:
        """Whether word ``k`` is two ints only: its value is its text, nothing unresolved."""
        return k not in self._whole and self._value(k) is None

    def __len__(self) -> int:
        return len(self._spans) // 2

    @overload
    def __getitem__(self, k: int) -> Word: ...
    @overload
    def __getitem__(self, k: slice) -> list[Word]: ...
    def __getitem__(self, k: int | slice) -> Word | list[Word]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        w = self._whole.get(k)
        if w is not None:
            return w
        start, end = self._spans[2 * k], self._spans[2 * k + 1]
        raw = self.text[start:end]
        v = self._values[k] if self._values is not None else None
        return Word(raw if v is None else v, start, end, raw)

    def __iter__(self) -> Iterator[Word]:
        for k in range(len(self)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Words, list, tuple)):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # a list's value, not hashable

    def __repr__(self) -> str:
        return f"Words({list(self)!r})"


def split_commands(text: str, start: int = 0, end: int | None = None) -> list[Words]:
    """The simple commands of ``text[start:end]``, each its words (redirections dropped),
    including commands inside ``$(...)`` and backticks. Never raises: an unclosed quote ends
    at the end of the text."""
    out: list[Words] = []
    _scan(text, start, len(text) if end is None else end, out)
    return out


def array_elements(text: str, word: Word) -> list[Word] | None:
    """The element words of an array assignment word ``NAME=(a "b c")`` (positions in
    ``text``), or None when ``word`` is not one."""
    m = _ARRAY_START.match(word.raw)
    if m is None or word.raw[m.end() : m.end() + 1] != "(" or not word.raw.endswith(")"):
        return None
    a = word.start + m.end() + 1
    return [w for cmd in split_commands(text, a, word.end - 1) for w in cmd]


def _heredoc_end(text: str, i: int, end: int, pending: list[tuple[str, bool]]) -> int:
    """Index past the bodies of the ``pending`` here-documents starting at line ``i``."""
    for delim, strip_tabs in pending:
        while i < end:
            nl = text.find("\n", i, end)
            stop = end if nl < 0 else nl
            line = text[i:stop].rstrip("\r")
            i = stop + 1
            if (line.lstrip("\t") if strip_tabs else line) == delim:
                break
    pending.clear()
    return min(i, end)


def _fd_end(text: str, i: int, end: int) -> int:
    """Index past the digits starting at ``i`` (a redirection's file descriptor)."""
    while i < end and text[i].isdigit():
        i += 1
    return i


def _scan(text: str, i: int, end: int, out: list[Words]) -> None:
    cmd = Words(text)
    skip_next = False
    heredocs: list[tuple[str, bool]] = []
    while i < end:
        ch = text[i]
        if ch == "\n" and heredocs:
            if cmd:
                out.append(cmd)
            cmd = Words(text)
            i = _heredoc_end(text, i + 1, end, heredocs)
            continue
        at = _fd_end(text, i, end) if ch.isdigit() else i  # ``0<<'EOT'``: a here-doc on fd 0
        if (
            text.startswith("<", at)
            and (h := _HEREDOC.match(text, at)) is not None
            and not text.startswith("<<<", at)
        ):
            delim = next(g for g in h.groups()[1:] if g is not None)
            heredocs.append((delim, h.group(1) == "-"))
            i = h.end()
            continue
        if ch in _SPACE:
            i += 1
            continue
        if ch == "\\" and i + 1 < end and text[i + 1] == "\n":
            i += 2
            continue
        if ch == "\r" and i + 1 < end and text[i + 1] == "\n":
            i += 1
            continue
        if ch == "#":
            while i < end and text[i] != "\n":
                i += 1
            continue
        if ch == "\n" or ch in _OPERATOR_START:
            if cmd:
                out.append(cmd)
            cmd = Words(text)
            i += 2 if text.startswith(("&&", "||", ";;"), i) else 1
            continue
        if (ch in "<>" and not _PLACEHOLDER.match(text, i)) or (
            ch.isdigit() and i + 1 < end and text[i + 1] in "<>"
        ):
            while i < end and (text[i].isdigit() or text[i] in "<>&"):
                i += 1
            skip_next = True  # the redirection's target (or a here-doc's delimiter)
            continue
        first = i
        value, i = _word(text, i, end, out)
        if skip_next:
            skip_next = False
            continue
        cmd.add(first, i, value)
    if cmd:
        out.append(cmd)


def _word(text: str, i: int, end: int, out: list[Words]) -> tuple[str | None, int]:
    """The value of the word starting at ``i`` (None when it is its text as written: most
    words) and the index past it."""
    start = i
    buf: list[str] = []
    if (m := _PLAIN.match(text, i, end)) is not None:
        i = m.end()
        if i == end or text[i] in " \t\n;&|)>":  # breaks that need no second look
            return None, i
        buf.append(m.group())
    while i < end:
        ch = text[i]
        if ch == "<" and (m := _PLACEHOLDER.match(text, i)):
            buf.append(m.group(0))
            i = m.end()
            continue
        if ch in _BREAK or (ch == "\r" and text.startswith("\r\n", i)):
            if ch == "(" and _ARRAY_START.fullmatch(text, start, i):
                j = closing(text, i, end, comments=True)  # NAME=(...): one word
                buf.append(text[i:j])
                i = j
                continue
            break
        if ch == "\\":
            if i + 1 < end and text[i + 1] == "\n":
                i += 2
                continue
            if i + 1 < end:
                buf.append(text[i + 1])
            i += 2
        elif ch == "'":
            j = text.find("'", i + 1, end)
            j = end if j < 0 else j
            buf.append(text[i + 1 : j])
            i = j + 1
        elif ch == '"':
            i = _double(text, i + 1, end, buf, out)
        elif ch == "$" and text.startswith("$'", i):
            j = i + 2
            while j < end and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            buf.append(text[i : j + 1])
            i = j + 1
        elif ch == "$" and text.startswith(("$(", "${"), i):
            j = closing(text, i + 1, end)
            if text[i + 1] == "(" and not text.startswith("$((", i):
                _scan(text, i + 2, j - 1, out)
            buf.append(text[i:j])
            i = j
        elif ch == "`":
            j = text.find("`", i + 1, end)
            j = end if j < 0 else j
            _scan(text, i + 1, j, out)
            buf.append(text[i : j + 1])
            i = j + 1
        elif (m := _PLAIN.match(text, i, end)) is not None:
            buf.append(m.group())
            i = m.end()
        else:
            buf.append(ch)
            i += 1
    i = min(i, end)
    value = "".join(buf)
    return (None if value == text[start:i] else value), i


def _double(text: str, i: int, end: int, buf: list[str], out: list[Words]) -> int:
    while i < end and text[i] != '"':
        ch = text[i]
        if ch == "\\" and i + 1 < end and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                buf.append(text[i + 1])
            i += 2
        elif ch == "$" and text.startswith(("$(", "${"), i):
            j = closing(text, i + 1, end)
            if text[i + 1] == "(" and not text.startswith("$((", i):
                _scan(text, i + 2, j - 1, out)
            buf.append(text[i:j])
            i = j
        else:
            buf.append(ch)
            i += 1
    return i + 1


def closing(text: str, i: int, end: int, comments: bool = False) -> int:
    """Index just past the bracket matching the one at ``i`` (``(`` or ``{``), quotes aware
    (and, with ``comments``, skipping ``# ...`` comments, as in an array's body)."""
    open_ch = text[i]
    close_ch = ")" if open_ch == "(" else "}"
    depth = 0
    while i < end:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if comments and ch == "#" and text[i - 1] in " \t\n":
            j = text.find("\n", i, end)
            i = end if j < 0 else j
            continue
        if comments and ch == '"':
            j = i + 1
            while j < end and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "'" and open_ch == "(":
            j = text.find("'", i + 1, end)
            i = end if j < 0 else j + 1
            continue
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return end

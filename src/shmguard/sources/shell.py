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
from dataclasses import dataclass

_OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")")
_SPACE = " \t"
_BREAK = " \t\n;&|()<>"
#: ``<YOUR_TOKEN>``-style documentation placeholders, also of several words on one line
#: (``-v <path to imagenet>:/imagenet``): kept as literal text, not redirections.
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w./:-]*(?: [\w./:-]+)*>")
#: The start of an array assignment's word: ``NAME=(`` or ``NAME+=(``.
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
#: A here-document operator and its delimiter word (``<<EOF``, ``<<-'EOF'``, ``<< "END"``).
_HEREDOC = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([^\s;&|()<>]+))")


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


def split_commands(text: str, start: int = 0, end: int | None = None) -> list[list[Word]]:
    """The simple commands of ``text[start:end]``, each a list of words (redirections
    dropped), including commands inside ``$(...)`` and backticks. Never raises: an unclosed
    quote ends at the end of the text."""
    out: list[list[Word]] = []
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


def _scan(text: str, i: int, end: int, out: list[list[Word]]) -> None:
    cmd: list[Word] = []
    skip_next = False
    heredocs: list[tuple[str, bool]] = []
    while i < end:
        ch = text[i]
        if ch == "\n" and heredocs:
            if cmd:
                out.append(cmd)
            cmd = []
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
        if ch == "\n" or any(text.startswith(op, i) for op in _OPERATORS):
            if cmd:
                out.append(cmd)
            cmd = []
            i += 2 if text.startswith(("&&", "||", ";;"), i) else 1
            continue
        if (ch in "<>" and not _PLACEHOLDER.match(text, i)) or (
            ch.isdigit() and i + 1 < end and text[i + 1] in "<>"
        ):
            while i < end and (text[i].isdigit() or text[i] in "<>&"):
                i += 1
            skip_next = True  # the redirection's target (or a here-doc's delimiter)
            continue
        word, i = _word(text, i, end, out)
        if skip_next:
            skip_next = False
            continue
        cmd.append(word)
    if cmd:
        out.append(cmd)


def _word(text: str, i: int, end: int, out: list[list[Word]]) -> tuple[Word, int]:
    start = i
    buf: list[str] = []
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
        else:
            buf.append(ch)
            i += 1
    i = min(i, end)
    raw, value = text[start:i], "".join(buf)
    # one string when no quote was removed (most words): a 7 MB run line has 700k words
    return Word(raw if value == raw else value, start, i, raw), i


def _double(text: str, i: int, end: int, buf: list[str], out: list[list[Word]]) -> int:
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

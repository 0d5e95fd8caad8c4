"""Where prose may break (issue 23 item 5): never inside a size or a short quoted message.

Rich wraps a text at any run of whitespace (``rich._wrap.divide_line``), so ``64 MiB`` at the
end of a line became ``64`` and, on the next, ``MiB``; ``used 0 B`` became ``used 0`` and ``B``.
:func:`divide_line` is Rich's greedy algorithm over *atoms* instead of words: a number and the
unit after it (``64 MiB``, ``0.3 s``, ``~18.38 MiB``) are one atom, and so is a quoted message
(``'...'``, ``"..."``, a backquoted span) that fits on one line; a longer quoted message wraps at
its spaces, as prose does (folding or cropping it would lose characters). The output layer
(cli/_output.py) puts it in Rich's place, so every table cell and paragraph wraps this way.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, chop_cells

#: Rich's word: leading whitespace, the word and the whitespace after it.
_WORD = re.compile(r"\s*\S+\s*")
#: A word that ends a number (``64``, ``~18.38``, ``1,234``, ``(0``).
_NUMBER_END = re.compile(r"\d\s$")
#: A unit that follows a number after one space, then punctuation or nothing.
_UNIT = re.compile(
    r"(?:B|KiB|MiB|GiB|TiB|PiB|EiB|kB|KB|MB|GB|TB|bytes?|s|ms|us|µs|ns|min|h|%)"
    r"(?![\w])"
)
_QUOTES = "'\"`"
#: Closing punctuation a quoted message may have after its quote.
_AFTER_QUOTE = ",.;:)]!?"
#: The most words one quoted atom may join (a bound on the look-ahead).
_QUOTE_WORDS = 64


def atoms(text: str, width: int) -> list[tuple[int, str]]:
    """``text`` as (start offset, atom) pairs: Rich's words, with a number joined to its unit
    and a quoted message that fits in ``width`` joined into one."""
    words = [(m.start(), m.group(0)) for m in _WORD.finditer(text)]
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(words):
        start = words[i][0]
        j = _quote_end(words, i, width)
        while j + 1 < len(words) and _joins_unit(words[j][1], words[j + 1][1]):
            j += 1
        out.append((start, text[start : words[j][0] + len(words[j][1])]))
        i = j + 1
    return out


def _joins_unit(word: str, following: str) -> bool:
    return (
        word.endswith(" ")
        and not word.endswith("  ")
        and bool(_NUMBER_END.search(word) and _UNIT.match(following))
    )


def _quote_end(words: list[tuple[int, str]], i: int, width: int) -> int:
    """Index of the word that closes a quoted message opened by word ``i`` (``i`` itself when
    it opens none, closes itself, or the message would not fit in ``width``)."""
    word = words[i][1].strip()
    quote = word[:1] if word[:1] in _QUOTES else word[1:2] if word[:1] in "([" else ""
    if not quote or (word.rstrip(_AFTER_QUOTE).endswith(quote) and len(word) > 2):
        return i
    length = cell_len(words[i][1].lstrip())
    for j in range(i + 1, min(len(words), i + _QUOTE_WORDS)):
        length += cell_len(words[j][1])
        if length > width:
            return i
        if words[j][1].strip().rstrip(_AFTER_QUOTE).endswith(quote):
            return j
    return i


def divide_line(text: str, width: int, fold: bool = True) -> list[int]:
    """Offsets at which to break ``text`` to fit ``width`` cells (``rich._wrap.divide_line``'s
    contract and algorithm, over :func:`atoms`)."""
    breaks: list[int] = []
    offset = 0
    for start, atom in atoms(text, width):
        length = cell_len(atom.rstrip())
        if width - offset >= length:
            offset += cell_len(atom)
        elif length > width:  # longer than a line: Rich's fold or crop
            if fold:
                pieces = chop_cells(atom, width=width)
                for n, piece in enumerate(pieces):
                    if start:
                        breaks.append(start)
                    if n == len(pieces) - 1:
                        offset = cell_len(piece)
                    else:
                        start += len(piece)
            else:
                if start:
                    breaks.append(start)
                offset = cell_len(atom)
        elif offset and start:
            breaks.append(start)
            offset = cell_len(atom)
    return breaks

"""Shell variables a script assigns itself, resolved in the words of its later commands.

Launch scripts name the image and the options once and expand them on the run line::

    IMAGE=nvcr.io/nvidia/pytorch:24.01-py3
    DOCKER_OPTS="--gpus all -v /data:/data"
    docker run --rm ${DOCKER_OPTS} "${IMAGE}" python train.py --workers 8

:class:`ShellVars` records the simple assignments of the file in order (``NAME=value``,
``export``/``readonly``/``declare``/``typeset``/``local`` with their options, arrays
``NAME=(a "b c")``, ``NAME+=``) and :meth:`ShellVars.expand` rewrites a later command's words
as the shell would (POSIX.1-2017 XCU 2.6.2 parameter expansion, 2.6.5 field splitting on
blanks, 2.6.7 quote removal; bash arrays): ``$NAME``, ``${NAME}``, ``${NAME:-default}`` and
``${NAME-default}`` (the default when the file does not assign NAME: it may come from the
environment, but the default is what the script says), ``${NAME:+alt}`` when NAME is
assigned, ``"${ARR[@]}"`` (one word per element), ``${ARR[N]}``. An unquoted expansion is
split into fields; a quoted one is not.

What cannot be resolved (a variable from the environment, ``$1``, ``$@``, ``$(...)``,
``${NAME%pattern}``) stays as written in the word's value, and the word records it
(:attr:`~shmguard.sources.shell.Word.unresolved`); a word that is nothing but one unquoted
unresolved expansion is :attr:`~shmguard.sources.shell.Word.bare`: it may stand for any
number of words, flags included. A word from an expansion keeps the span of the word that
was written (``${DOCKER_OPTS}``), so an edit never lands inside a variable's text.
Assignments inside functions or branches are taken in file order (the last one wins).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from shmguard.sources.shell import Word, Words, array_elements, closing
from shmguard.units import whole_number

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_DECLARE = frozenset({"export", "readonly", "declare", "typeset", "local"})
#: ``${NAME...}`` operators resolved here: ``:-`` ``-`` ``:=`` ``=`` ``:+`` ``+``.
_PARAM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:\[([@*]|\d+)\])?(?:(:?[-=+])(.*))?", re.S)
_SPECIAL = "@*#?$!-0123456789"


@dataclass(frozen=True)
class Value:
    """A variable's value: ``items`` (one for a scalar, the elements of an array) and
    whether it was assigned as an array."""

    items: tuple[str, ...]
    array: bool = False

    @property
    def scalar(self) -> str:
        """``$NAME`` of an array is its first element (bash)."""
        return self.items[0] if self.items else ""


@dataclass
class _Fields:
    """Fields being built from one word: quoted text joins, unquoted expansions split."""

    out: list[str] = field(default_factory=list)
    cur: list[str] = field(default_factory=list)
    started: bool = False
    nosplit: bool = False  # an assignment's value: quotes removed, expansions not split

    def text(self, s: str) -> None:
        self.cur.append(s)
        self.started = True

    def split(self, s: str) -> None:
        if self.nosplit:
            self.text(s)
            return
        if s[:1].isspace():
            self.flush()
        for k, part in enumerate(s.split()):
            if k:
                self.flush()
            self.text(part)
        if s[-1:].isspace():
            self.flush()

    def flush(self) -> None:
        if self.started:
            self.out.append("".join(self.cur))
        self.cur, self.started = [], False


@dataclass
class _Word:
    """The state of one word's expansion: its fields, what stayed unresolved."""

    fields: _Fields = field(default_factory=_Fields)
    unresolved: list[str] = field(default_factory=list)


class ShellVars:
    """The variables a file has assigned so far (:meth:`assign`) and the expansion of a
    command's words with them (:meth:`expand`)."""

    def __init__(self) -> None:
        self.values: dict[str, Value] = {}

    def assign(self, text: str, words: Sequence[Word]) -> bool:
        """Record the assignments of ``words`` when the command is only assignments (with
        ``export``/``readonly``/``declare``/``typeset``/``local`` and their options);
        True then. ``NAME=v cmd`` (a command's own environment) assigns nothing."""
        i = 0
        if words and words[0].value in _DECLARE:
            i = 1
            while i < len(words) and words[i].value.startswith(("-", "+")):
                i += 1
        rest = range(i, len(words))  # indexes, not a copy: a run line may have 1.5M words
        if not rest or not all(_ASSIGN.match(words[k].raw) for k in rest):
            return bool(i) and bool(rest) and _all_names(words[k] for k in rest)
        for k in rest:
            w = words[k]
            m = _ASSIGN.match(w.raw)
            assert m is not None
            name, plus = m.group(1), m.group(2)
            elements = array_elements(text, w)
            raws = [e.raw for e in elements] if elements is not None else [w.raw[m.end() :]]
            if any(self._unknown(r) for r in raws):
                self.values.pop(name, None)  # DOCKER_IMAGE="$1", ARGS=("$@"): still unknown
                continue
            if elements is not None:
                value = Value(tuple(f for r in raws for f in self._fields(r)), array=True)
            else:
                value = Value(("".join(self._fields(raws[0], split=False)),))
            old = self.values.get(name)
            if plus and old is not None:
                value = (
                    Value(old.items + value.items, True)
                    if value.array or old.array
                    else Value((old.scalar + value.scalar,))
                )
            self.values[name] = value
        return True

    def expand(self, words: Words) -> Words:
        """``words`` with what the file assigned expanded: each word becomes zero or more
        words, each with the span of the word as written (``words`` itself when no word
        holds an expansion)."""
        if not words.mentions("$`"):
            return words
        out = Words(words.text)
        for k in range(len(words)):
            raw = words.raw(k)
            if "$" not in raw and "`" not in raw:
                out.take(words, k)
                continue
            w = words[k]
            if not self.values and "{" not in w.raw:  # nothing to resolve: the splitter's value
                bare = _is_bare(w.raw)
                out.append(replace(w, unresolved=(w.raw,) if bare else (), bare=bare))
                continue
            state = _Word()
            self._word(w.raw, state, quoted=False)
            state.fields.flush()
            names = tuple(state.unresolved)
            bare = len(names) == 1 and _is_bare(w.raw)
            for value in state.fields.out:
                out.append(replace(w, value=value, unresolved=names, bare=bare))
        return out

    def _unknown(self, raw: str) -> bool:
        """``raw`` is one expansion that the file cannot resolve (``"$1"``, ``"$@"``)."""
        if not (_is_bare(raw) or _is_bare(raw[1:-1] if raw[:1] == raw[-1:] == '"' else "")):
            return False
        state = _Word()
        self._word(raw, state, quoted=False)
        return bool(state.unresolved)

    def _fields(self, raw: str, split: bool = True) -> list[str]:
        state = _Word(_Fields(nosplit=not split))
        self._word(raw, state, quoted=False)
        state.fields.flush()
        return state.fields.out

    def _word(self, raw: str, st: _Word, quoted: bool) -> None:
        """Expand ``raw`` (a word's source text, or a default's) into ``st``; ``quoted``:
        inside double quotes (no field splitting; quotes are literal text)."""
        f = st.fields
        i, n = 0, len(raw)
        while i < n:
            ch = raw[i]
            if ch == "\\":
                nxt = raw[i + 1 : i + 2]
                if nxt == "\n":
                    pass
                elif quoted and nxt not in '$`"\\':
                    f.text(ch + nxt)
                else:
                    f.text(nxt)
                i += 2
            elif ch == "'" and not quoted:
                j = raw.find("'", i + 1)
                j = n if j < 0 else j
                f.text(raw[i + 1 : j])
                i = j + 1
            elif ch == '"' and not quoted:
                j = _close_double(raw, i + 1)
                f.text("")
                self._word(raw[i + 1 : j], st, quoted=True)
                i = j + 1
            elif ch == "$" and raw.startswith("$'", i) and not quoted:
                j = raw.find("'", i + 2)
                j = n if j < 0 else j
                f.text(raw[i : j + 1])
                i = j + 1
            elif ch == "$" and raw.startswith("${", i):
                j = closing(raw, i + 1, len(raw))
                self._param(raw[i + 2 : j - 1], raw[i:j], st, quoted)
                i = j
            elif (ch == "$" and raw.startswith("$(", i)) or ch == "`":
                j = closing(raw, i + 1, len(raw)) if ch == "$" else raw.find("`", i + 1) + 1 or n
                st.unresolved.append(raw[i:j])
                f.text(raw[i:j])
                i = j
            elif ch == "$" and (m := _NAME.match(raw, i + 1)) is not None:
                self._value(m.group(0), None, raw[i : m.end()], st, quoted)
                i = m.end()
            elif ch == "$" and raw[i + 1 : i + 2] and raw[i + 1] in _SPECIAL:
                st.unresolved.append(raw[i : i + 2])
                f.text(raw[i : i + 2])
                i += 2
            else:
                f.text(ch)
                i += 1

    def _param(self, body: str, written: str, st: _Word, quoted: bool) -> None:
        m = _PARAM.fullmatch(body)
        if m is None:  # ${#X}, ${X%pat}, ${X/a/b}, ${!X}, ${1}: not resolved here
            st.unresolved.append(written)
            st.fields.text(written)
            return
        name, index, op, word = m.groups()
        value = self.values.get(name)
        if op is None:
            self._value(name, index, written, st, quoted)
            return
        if op.startswith(":"):
            present = value is not None and any(value.items)
        else:
            present = value is not None
        if op.endswith("+"):
            if present:
                self._word(word, st, quoted)
            elif value is None:  # not assigned here: the environment decides
                st.unresolved.append(written)
                st.fields.text(written)
            return
        if present:
            self._value(name, index, written, st, quoted)
        else:  # :- - := =: the default (also when the environment might set the name)
            self._word(word, st, quoted)

    def _value(self, name: str, index: str | None, written: str, st: _Word, q: bool) -> None:
        value = self.values.get(name)
        f = st.fields
        if value is None:
            st.unresolved.append(written)
            f.text(written)
            return
        if index is None or index.isdigit():
            k = whole_number(index) if index else 0  # None: past any array's end
            items = [value.items[k] if k is not None and k < len(value.items) else ""]
        else:
            items = list(value.items)
        if index == "*" and q:
            items = [" ".join(items)]
        for k, item in enumerate(items):
            if k and q and index == "@":
                f.flush()  # "${A[@]}": a word per element
            if q:
                f.text(item)
            elif item:
                f.split(item)


def _all_names(words: Iterable[Word]) -> bool:
    """``export NAME`` / ``declare -a NAME``: an attribute only, still no command."""
    return all(_NAME.fullmatch(w.raw) for w in words)


def _is_bare(raw: str) -> bool:
    """``$X``, ``${X...}``, ``"${A[@]}"``, ``"$@"``, ``$(cmd)``: one expansion and nothing
    else, unquoted (or an array or ``$@``/``$*`` in quotes, which still gives any number of
    words)."""
    inner = raw
    quoted = len(raw) >= 2 and raw[0] == raw[-1] == '"'
    if quoted:
        inner = raw[1:-1]
        if not (inner in ("$@", "$*") or re.fullmatch(r"\$\{[A-Za-z_]\w*\[[@*]\]\}", inner)):
            return False
    if re.fullmatch(r"\$(?:[A-Za-z_]\w*|[@*])", inner):
        return True
    if inner.startswith("${"):
        return closing(inner, 1, len(inner)) == len(inner)
    if inner.startswith("$("):
        return closing(inner, 1, len(inner)) == len(inner)
    return False


def _close_double(raw: str, i: int) -> int:
    """Index of the ``"`` closing a double-quoted string whose text starts at ``i``."""
    while i < len(raw) and raw[i] != '"':
        if raw[i] == "\\":
            i += 2
        elif raw.startswith(("${", "$("), i):
            i = closing(raw, i + 1, len(raw))
        else:
            i += 1
    return min(i, len(raw))


__all__ = ["ShellVars", "Value"]

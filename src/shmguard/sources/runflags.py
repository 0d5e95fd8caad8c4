"""The flags and the command of a run line (:class:`~shmguard.sources.runline.RunLine`), built
on demand from the line's :class:`~shmguard.sources.shell.Words`.

Issue 24 item 3(d): a 7 MB ``docker run`` line (780k ``-e V=x`` flags, 1.56M words) took 410 MB
when each word and each flag was an object with its strings and int offsets (260-350 bytes a
word). Here a flag is three ints in arrays (its word, its name, where its value is) and a
:class:`Flag` is built when a rule reads it; rules that look for some flags only
(``--shm-size``, the mounts) select them by name (:meth:`Flags.named`) without building the
others.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar, overload

from shmguard.sources.shell import Words


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of a run line.

    Attributes:
        name: the long name (``--shm-size``, ``--memory`` for ``-m``).
        spelled: as written (``-m``, ``--memory``, ``-itd``).
        value: the value after shell quote removal; None for a boolean flag.
        flag_start, flag_end: byte span of the word holding the flag.
        value_start, value_end: byte span of the value's source text (quotes included), the
            part of ``--x=v`` after ``=``, or the next word; None for a boolean flag.
    """

    name: str
    spelled: str
    value: str | None
    flag_start: int
    flag_end: int
    value_start: int | None = None
    value_end: int | None = None


_T = TypeVar("_T")


class _Built(Sequence[_T]):
    """A sequence whose items are built when asked for (:meth:`_item`, ``0 <= k < len``);
    it compares and hashes as the tuple of its items, as the tuple it stands for did."""

    __slots__ = ()

    def _item(self, k: int) -> _T:
        raise NotImplementedError

    @overload
    def __getitem__(self, k: int) -> _T: ...
    @overload
    def __getitem__(self, k: slice) -> list[_T]: ...
    def __getitem__(self, k: int | slice) -> _T | list[_T]:
        n = len(self)
        if isinstance(k, slice):
            return [self._item(j) for j in range(*k.indices(n))]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self._item(k)

    def __iter__(self) -> Iterator[_T]:
        for k in range(len(self)):
            yield self._item(k)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_Built, tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


#: Flags a line may have and still keep the :class:`Flag` objects it built.
SMALL = 256
#: :meth:`Flags.add` codes for where a value is: none (a boolean flag), the next word.
NO_VALUE, NEXT_WORD = -1, -2


class Flags(_Built[Flag]):
    """The flags of a run line, in order, each built as a :class:`Flag` when asked for: a
    7 MB run line has 780k flags, about 200 bytes each as objects with their int offsets.
    Here a flag is three ints: the index of its word among the line's :class:`Words`, its
    long name (an index into the distinct names) and where its value is (none, the next
    word, or the flag word's value from an index on); the byte offsets come from ``offset``
    when it is built. :meth:`named` selects flags by name without building the others."""

    __slots__ = (
        "_at", "_built", "_cut", "_ids", "_names", "_offset", "_spelled", "_words",
    )  # fmt: skip

    def __init__(self, words: Words, offset: Callable[[int], int]) -> None:
        self._words = words
        self._offset = offset
        self._names: dict[str, int] = {}  # long name -> its index in _spelled
        self._spelled: list[str] = []
        self._at = array("q")
        self._ids = array("i")
        self._cut = array("i")
        # A line of up to SMALL flags keeps the flags it built: the rules ask for the same
        # few a dozen times a line (a big line builds each time and keeps nothing).
        self._built: list[Flag | None] | None = None

    def add(self, at: int, name: str, cut: int) -> None:
        """Append the flag ``name`` of word ``at``; its value: ``cut`` :data:`NO_VALUE`,
        :data:`NEXT_WORD`, or the word's value from index ``cut`` on (the parser's part)."""
        nid = self._names.get(name)
        if nid is None:
            nid = self._names[name] = len(self._spelled)
            self._spelled.append(name)
        self._ids.append(nid)
        self._at.append(at)
        self._cut.append(cut)
        self._built = None

    def named(self, *names: str) -> Named:
        """The flags with one of these long names, in order."""
        ids = [self._names[n] for n in names if n in self._names]
        if not ids:
            return _NONE
        if len(ids) == 1:
            return Named(self, self._where(ids[0]))
        return Named(self, sorted(j for one in ids for j in self._where(one)))

    def last(self, name: str) -> Flag | None:
        """The last flag named ``name``, or None."""
        one = self._names.get(name)
        if one is None:
            return None
        n = len(self._ids)
        return self._item(n - 1 - self._ids[::-1].index(one))

    def _where(self, one: int) -> array[int]:
        """The indexes of the flags whose name is ``one``, found by C scans (no Python step
        per other flag)."""
        sel, j = array("q"), -1
        for _ in range(self._ids.count(one)):
            j = self._ids.index(one, j + 1)
            sel.append(j)
        return sel

    def __len__(self) -> int:
        return len(self._ids)

    def _item(self, k: int) -> Flag:
        built = self._built
        if built is None and len(self._ids) <= SMALL:
            built = self._built = [None] * len(self._ids)
        f = built[k] if built is not None else None
        if f is None:
            f = _flag(
                self._words, self._offset, self._at[k], self._spelled[self._ids[k]], self._cut[k]
            )
            if built is not None:
                built[k] = f
        return f


class Named(_Built[Flag]):
    """Some flags of a run line (:meth:`Flags.named`), in order, built when asked for."""

    __slots__ = ("_flags", "_sel")

    def __init__(self, flags: Flags | None, sel: Sequence[int]) -> None:
        self._flags, self._sel = flags, sel  # indexes into ``flags``

    def __len__(self) -> int:
        return len(self._sel)

    def _item(self, k: int) -> Flag:
        assert self._flags is not None  # only no flags come without their line
        return self._flags._item(self._sel[k])


#: No flags (what most :meth:`Flags.named` calls find).
_NONE = Named(None, ())


class Command(_Built[tuple[str, int, int]]):
    """The words of a run line from index ``first`` on, as (value, start byte, end byte),
    built when asked for."""

    __slots__ = ("_first", "_offset", "_words")

    def __init__(self, words: Words, first: int, offset: Callable[[int], int]) -> None:
        self._words, self._first, self._offset = words, first, offset

    def __len__(self) -> int:
        return max(len(self._words) - self._first, 0)

    def _item(self, k: int) -> tuple[str, int, int]:
        ws, i = self._words, self._first + k
        return ws.value(i), self._offset(ws.start(i)), self._offset(ws.end(i))


def _flag(ws: Words, offset: Callable[[int], int], i: int, name: str, cut: int) -> Flag:
    """The flag ``name`` of word ``i``: a boolean one (``cut`` :data:`NO_VALUE`), its value
    the next word (:data:`NEXT_WORD`), or ``ws.value(i)[cut:]`` (``--name=value``,
    ``-m2g``, ``-e=X``)."""
    v = ws.value(i)
    long = v.startswith("--")
    spelled = name if long else v
    start, end = offset(ws.start(i)), offset(ws.end(i))
    if cut == NO_VALUE:
        return Flag(name, spelled, None, start, end)
    if cut == NEXT_WORD:
        nxt = i + 1
        return Flag(
            name, spelled, ws.value(nxt), start, end, offset(ws.start(nxt)), offset(ws.end(nxt))
        )
    val, raw = v[cut:], ws.raw(i)
    if long:  # --name=value: the value starts after the "=" as written
        vs = ws.start(i) + raw.find("=") + 1
    else:
        vs = ws.end(i) - len(val) if raw.endswith(val) else ws.start(i)
    return Flag(name, spelled, val, start, end, offset(vs), end)


__all__ = ["NEXT_WORD", "NO_VALUE", "Command", "Flag", "Flags", "Named"]

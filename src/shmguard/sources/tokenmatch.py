"""Matching image references and command lines against the token lists of
:mod:`shmguard.sources.workload_tokens`, in Python and as regular expressions for policies.

An image reference is read as the distribution spec writes it
(github.com/distribution/reference ``reference.go``: ``[domain/]path[:tag][@digest]``), after
ASCII lower-casing (only ASCII letters change, so positions stay):

* the digest, from the first ``@``, is not read;
* the name is split on ``/``; its first component is the registry when more components follow
  and it holds a ``.`` or a ``:`` or is ``localhost`` (the Docker rule, ``splitDockerDomain``),
  and the namespace path and the repository name are the rest;
* in each component only the text before its first ``:`` is matched: the last one's tag
  (``24.01-py3``) is not, and in another component a ``:`` is invalid anyway;
* tokens are the runs of letters and digits; ``-``, ``_``, ``.`` separate them in a valid
  reference, and in a template (``${VLLM_IMAGE:-vllm/vllm-openai}``, ``<your-vllm-image>``)
  any other character does too.

:func:`match_image` gives the first entry found, scanning from the repository name back to
the first namespace component and, in each, from the left (so ``pytorch/torchserve`` is
TorchServe and ``ghcr.io/huggingface/text-generation-inference`` is TGI). :data:`IMAGE_PATTERN`
is the same test as one RE2 regular expression (no look-around, no back-references) over the
lower-cased reference: true exactly when :func:`match_image` finds an entry, for every ASCII
string (tests/sources/test_workload_search.py checks it on the corpus's images and on random
strings). A command line is matched with :data:`COMMAND_PATTERN` itself, by Python ``re`` and
by the policy engines alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from shmguard.sources.workload_tokens import (
    COMMAND_TOKENS,
    IMAGE_TOKENS,
    NOT_PROGRAM_WORDS,
    PROGRAM_COMMAND_TOKENS,
    PROGRAM_IMAGE_TOKENS,
    Token,
)

__all__ = [
    "COMMAND_PATTERN",
    "IMAGE_PATTERN",
    "ImageRef",
    "TokenMatch",
    "ascii_lower",
    "command_pattern",
    "image_pattern",
    "match_command",
    "match_image",
    "match_program_command",
    "match_program_image",
    "parse_image",
]

_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_TOKEN = re.compile(r"[a-z0-9]+")
# how an image entry's name is written: tokens joined by single separators
_NAME = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")


def ascii_lower(text: str) -> str:
    """``text`` with its ASCII capitals lowered and nothing else changed (CEL's
    ``lowerAscii()``; positions stay the same)."""
    return text.lower() if text.isascii() else text.translate(_LOWER)


@dataclass(frozen=True)
class ImageRef:
    """An image reference cut into its parts (lower-cased, ASCII).

    Attributes:
        registry: the registry component (``nvcr.io``, ``localhost:5000``), "" when none.
        path: the namespace components and the repository name, last (``("nvidia",
            "pytorch")``), each whole (with any ``:tag``).
        tag: the last component's text after its first ``:``, "" when none.
        starts: the offset of each ``path`` component in the reference.
    """

    registry: str
    path: tuple[str, ...]
    tag: str
    starts: tuple[int, ...]

    @property
    def namespace(self) -> tuple[str, ...]:
        """The components before the repository name."""
        return self.path[:-1]

    @property
    def name(self) -> str:
        """The repository name, without its tag."""
        return self.path[-1].partition(":")[0] if self.path else ""


def parse_image(ref: str) -> ImageRef:
    """``ref`` cut into registry, namespace path, repository name and tag (module docstring).
    Never raises: any string has a reading."""
    low = ascii_lower(ref)
    name = low.partition("@")[0]
    comps = name.split("/")
    starts, at = [], 0
    for c in comps:
        starts.append(at)
        at += len(c) + 1
    first = comps[0]
    registry = ""
    if len(comps) > 1 and ("." in first or ":" in first or first == "localhost"):
        registry, comps, starts = first, comps[1:], starts[1:]
    return ImageRef(registry, tuple(comps), comps[-1].partition(":")[2], tuple(starts))


@dataclass(frozen=True)
class TokenMatch:
    """An entry found: the :class:`~shmguard.sources.workload_tokens.Token`, and the text it
    matched (as written, capitals kept) at ``start:end`` of the image or command."""

    token: Token
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class _ImageEntry:
    token: Token
    registry: str | None  # None: any registry (or none)
    namespace: tuple[str, ...]
    words: tuple[str, ...]


def _image_entries(tokens: Iterable[Token]) -> tuple[_ImageEntry, ...]:
    out = []
    for t in tokens:
        ref = parse_image(t.text)
        words = tuple(_TOKEN.findall(ref.name))
        ok = (
            t.text == ascii_lower(t.text)
            and "@" not in t.text
            and not ref.tag
            and _NAME.fullmatch(ref.name)
            and all(_TOKEN.fullmatch(c) for c in ref.namespace)
            and "localhost" not in words
        )
        if t.tag and (len(words) > 1 or ref.namespace):
            ok = False  # a tag holds a version of a one-word name
        if not ok:
            raise ValueError(f"image token {t.text!r}: write [registry/][namespace/]a-b-c")
        out.append(_ImageEntry(t, ref.registry or None, ref.namespace, words))
    return tuple(out)


@dataclass(frozen=True)
class _Table:
    """The image entries of one token list, indexed for :func:`_match_image`."""

    # the entries by their first word, longest first (a run wins over its first word alone)
    by_first: dict[str, tuple[_ImageEntry, ...]]
    # the first word of every entry: a reference holding none of them is not parsed (most
    # are not)
    words: tuple[str, ...]
    # a name marked ``tag``, followed by its version, as a token of the tag (``torch1``)
    tag_entry: dict[str, _ImageEntry]
    versioned: re.Pattern[str] | None


def _table(tokens: Iterable[Token]) -> _Table:
    entries = _image_entries(tokens)
    by_first: dict[str, tuple[_ImageEntry, ...]] = {}
    for e in sorted(entries, key=lambda e: -len(e.words)):
        by_first[e.words[0]] = (*by_first.get(e.words[0], ()), e)
    tag_entry = {e.words[0]: e for e in entries if e.token.tag}
    versioned = re.compile("(" + "|".join(tag_entry) + ")[0-9][a-z0-9]*") if tag_entry else None
    return _Table(by_first, tuple(sorted(by_first)), tag_entry, versioned)


_ML_TABLE = _table(IMAGE_TOKENS)
_PROGRAM_TABLE = _table(PROGRAM_IMAGE_TOKENS)
_VERSION = re.compile(r"[a-z0-9.]*")


def _run_end(rx: re.Pattern[str], text: str, at: int) -> int:
    """Where the run of ``rx`` (a pattern that matches the empty string) from ``at`` ends."""
    m = rx.match(text, at)
    return m.end() if m is not None else at


@lru_cache(maxsize=4096)
def _match_image(ref: str, programs: bool = False) -> tuple[_ImageEntry, int, int] | None:
    table = _PROGRAM_TABLE if programs else _ML_TABLE
    low = ascii_lower(ref)
    if not any(w in low for w in table.words):
        return None
    image = parse_image(ref)
    for i in range(len(image.path) - 1, -1, -1):
        part = image.path[i].partition(":")[0]
        found = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(part)]
        words = [w for w, _, _ in found]
        for j, word in enumerate(words):
            for e in table.by_first.get(word, ()):
                n = len(e.words)
                if tuple(words[j : j + n]) != e.words:
                    continue
                if e.namespace and (
                    image.path[: len(e.namespace)] != e.namespace
                    or i < len(e.namespace)
                    or (e.registry is not None and image.registry != e.registry)
                ):
                    continue
                start = image.starts[i] + found[j][1]
                if e.namespace:  # the match names its namespace (and registry)
                    start = 0 if e.registry is not None else image.starts[0]
                return e, start, image.starts[i] + found[j + n - 1][2]
    if table.versioned is not None and image.path and image.tag:
        at = image.starts[-1] + len(image.path[-1]) - len(image.tag)
        for m in _TOKEN.finditer(image.tag):
            v = table.versioned.fullmatch(m.group(0))
            if v is not None:
                end = _run_end(_VERSION, image.tag, m.end())
                return table.tag_entry[v.group(1)], at + m.start(), at + end
    return None


def _token_match(ref: str, hit: tuple[_ImageEntry, int, int] | None) -> TokenMatch | None:
    if hit is None:
        return None
    e, start, end = hit
    return TokenMatch(e.token, ref[start:end], start, end)


def match_image(ref: str) -> TokenMatch | None:
    """The first image entry ``ref`` holds (module docstring), or None."""
    return _token_match(ref, _match_image(ref))


# postgres-exporter, postgres-operator, ...: beside the program, not it
_NOT_PROGRAM = frozenset(NOT_PROGRAM_WORDS)


def match_program_image(ref: str) -> TokenMatch | None:
    """The first entry of :data:`~shmguard.sources.workload_tokens.PROGRAM_IMAGE_TOKENS`
    (browsers, PostgreSQL) ``ref`` holds, read as :func:`match_image` reads the ML list, or
    None. Asked only of an image with no ML token: the ML class is the more telling."""
    hit = _match_image(ref, True)
    if hit is not None:
        path = parse_image(ref).path
        if any(w in _NOT_PROGRAM for c in path for w in _TOKEN.findall(c.partition(":")[0])):
            return None
    return _token_match(ref, hit)


# --- the same test as RE2 regular expressions -------------------------------------------------
#
# Over the lower-cased reference. X is a character that may sit in a component's matched part
# (not "/", ":" or "@"), S a separator there (X but not a letter or digit). A name matches in:
#   a later path component:  ^([^/@]*/)+ (X*S)? WORDS ([^a-z0-9]|$)
#   the only component:      ^(X*S)? WORDS ([^a-z0-9/@][^/@]*)?(@|$)
#   a first component that has others after it, which then holds no "." (else it is the
#   registry):               ^(Y*T)? WORDS' (T Y*)? /      (Y, T: X, S without ".")
# a name under a namespace: ^(REGISTRY/)? NAMESPACE/ ([^/@]*/)* (X*S)? WORDS ([^a-z0-9]|$),
# REGISTRY the one written or any first component that is one; and a name marked ``tag``
# with its version in the last component's tag: ^([^/@]*/)* X*: ([^/@]*[^a-z0-9/@])? NAME[0-9]
# [^/@]* (@|$).

_X, _S = "[^/:@]", "[^a-z0-9/:@]"
_Y, _T = "[^/:@.]", "[^a-z0-9/:@.]"
_END = "(?:[^a-z0-9]|$)"
_ANY_REGISTRY = "(?:[^/@]*[.:][^/@]*|localhost)/"


def _words(entries: Iterable[_ImageEntry], sep: str) -> str:
    return "(?:" + "|".join(f"{sep}+".join(e.words) for e in entries) + ")"


def image_pattern(tokens: Iterable[Token] = IMAGE_TOKENS) -> str:
    """The RE2 regular expression (also Python ``re`` syntax) that matches a lower-cased image
    reference exactly when :func:`match_image` finds one of ``tokens`` in it."""
    entries = _image_entries(tokens)
    names = [e for e in entries if not e.namespace]
    alts = []
    if names:
        w, wy = _words(names, _S), _words(names, _T)
        alts += [
            f"(?:[^/@]*/)+(?:{_X}*{_S})?{w}{_END}",
            f"(?:{_X}*{_S})?{w}(?:[^a-z0-9/@][^/@]*)?(?:@|$)",
            f"(?:{_Y}*{_T})?{wy}(?:{_T}{_Y}*)?/",
        ]
    for e in entries:
        if e.namespace:
            reg = f"(?:{_ANY_REGISTRY})?" if e.registry is None else re.escape(e.registry) + "/"
            ns = "/".join(e.namespace)
            alts.append(f"{reg}{ns}/(?:[^/@]*/)*(?:{_X}*{_S})?{_words([e], _S)}{_END}")
    tagged = [e for e in entries if e.token.tag]
    if tagged:
        alts.append(
            f"(?:[^/@]*/)*{_X}*:(?:[^/@]*[^a-z0-9/@])?{_words(tagged, '')}[0-9][^/@]*(?:@|$)"
        )
    return "^(?:" + "|".join(alts) + ")"


#: :func:`image_pattern` of the image tokens.
IMAGE_PATTERN = image_pattern()

_SPACE = r"[ \t\n\r\f\v]+"


def command_pattern(tokens: Iterable[Token] = COMMAND_TOKENS) -> str:
    """The regular expression (RE2 and Python ``re`` read it alike) that finds one of the
    command phrases ``tokens`` in a lower-cased command line; group 1 is the phrase."""
    phrases = []
    for t in tokens:
        words = t.text.split(" ")
        if t.text != ascii_lower(t.text) or not all(words) or "'" in t.text or "`" in t.text:
            raise ValueError(f"command phrase {t.text!r}: lower case, single spaces")
        phrases.append(_SPACE.join(re.escape(w) for w in words))
    return "(?:^|[^a-z0-9])(" + "|".join(phrases) + f"){_END}"


#: :func:`command_pattern` of the command phrases.
COMMAND_PATTERN = command_pattern()
_COMMAND = re.compile(COMMAND_PATTERN)
_COMMAND_BY_TEXT = {t.text: t for t in COMMAND_TOKENS}
# one word of each phrase (its longest run of letters and digits): a line holding none of
# them is not searched (most command lines)
_COMMAND_WORDS = tuple(
    {max(_TOKEN.findall(t.text), key=len) for t in COMMAND_TOKENS if _TOKEN.search(t.text)}
)


_REST_OF_WORD = re.compile(r"[A-Za-z0-9._-]*")


_PROGRAM_COMMAND = re.compile(command_pattern(PROGRAM_COMMAND_TOKENS))
_PROGRAM_BY_TEXT = {t.text: t for t in PROGRAM_COMMAND_TOKENS}


def match_program_command(cmd: str) -> TokenMatch | None:
    """The first phrase of :data:`~shmguard.sources.workload_tokens.PROGRAM_COMMAND_TOKENS`
    in ``cmd`` (``playwright test``, ``cypress run``), or None."""
    m = _PROGRAM_COMMAND.search(ascii_lower(cmd))
    if m is None:
        return None
    token = _PROGRAM_BY_TEXT[re.sub(_SPACE, " ", m.group(1))]
    return TokenMatch(token, cmd[m.start(1) : m.end(1)], m.start(1), m.end(1))


def match_command(cmd: str) -> TokenMatch | None:
    """The first command phrase in ``cmd`` (by position), or None. Its ``text`` runs on to
    the end of the module or file name the phrase starts (``-m torch.distributed.run``,
    ``vllm.entrypoints.openai.api_server``)."""
    low = ascii_lower(cmd)
    if not any(w in low for w in _COMMAND_WORDS):
        return None
    m = _COMMAND.search(low)
    if m is None:
        return None
    token = _COMMAND_BY_TEXT[re.sub(_SPACE, " ", m.group(1))]
    end = _run_end(_REST_OF_WORD, cmd, m.end(1))
    return TokenMatch(token, cmd[m.start(1) : end], m.start(1), end)

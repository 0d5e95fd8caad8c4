"""Suppressions written in the checked files: inline comments and ``shmguard.io/ignore``.

Inline comments fit YAML, shell scripts, Makefiles, Dockerfiles and the shell code blocks of
Markdown: ``# shmguard: ignore[SHM001]``, ``# shmguard: ignore[SHM001,SHM011]`` (codes or
prefixes, as ``--ignore`` takes them) or a bare ``# shmguard: ignore`` (every code). In
Markdown prose, ``<!-- shmguard: ignore[SHM001] -->`` works the same; above a code fence it
applies to the fence's first line. A comment applies to

* the line it ends (a trailing comment: ``shm_size: 2Gi  # shmguard: ignore[SHM002]``), and
* when it stands alone on its line, to the next line that is not a comment (so a reason may
  follow on comment lines below it), as yamllint's ``# yamllint disable-line`` does;
* for a ``docker|podman run`` line, a comment above the line's first line applies to every
  finding in the whole command, since a comment line cannot sit inside a ``\\``-continued
  command without ending it.

The object-level form is the ``shmguard.io/ignore`` annotation (config.py
:data:`~shmguard.config.ANNOTATIONS`): on a Kubernetes workload or its pod template
(``metadata.annotations``), as a Compose service label, or a run line's
``--label shmguard.io/ignore=...``: comma-separated codes or prefixes not reported for that
object (read by :func:`~shmguard.sources.workload.classify` into ``Workload.ignore``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shmguard.model.finding import Finding

__all__ = ["ALL", "Suppressions", "matches", "scan"]

#: The code set of a bare ``# shmguard: ignore``: every code.
ALL: tuple[str, ...] = ("",)

_COMMENT = re.compile(
    r"(?:#|<!--)[ \t]*shmguard:[ \t]*ignore\b(?:\[(?P<codes>[^\]\n]*)\])?", re.IGNORECASE
)
_COMMENT_ONLY = re.compile(r"^[ \t]*(?:#|<!--)")
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)")


def matches(code: str, codes: Iterable[str]) -> bool:
    """Whether ``code`` is one of ``codes`` or starts with one of them (``""`` matches all)."""
    return any(code.startswith(c) for c in codes)


@dataclass(frozen=True)
class Suppressions:
    """The inline suppressions of one file: 1-based line number -> codes or prefixes that are
    not reported for findings starting on that line (:data:`ALL` for a bare comment)."""

    by_line: Mapping[int, tuple[str, ...]]

    def suppressed(self, f: Finding, head_line: int | None = None) -> bool:
        """Whether ``f`` is suppressed: by a comment on or above its start line, or, when
        ``head_line`` (the first line of its run command) is given, above that line."""
        lines = [f.location.line] if f.location is not None and f.location.line else []
        if head_line is not None:
            lines.append(head_line)
        return any(matches(f.code, self.by_line.get(n, ())) for n in lines)


def scan(text: str) -> Suppressions:
    """Find the ``shmguard: ignore`` comments of a file's text."""
    if "shmguard" not in text:  # the common case, at the cost of one search
        return Suppressions({})
    lines = text.splitlines()
    by_line: dict[int, tuple[str, ...]] = {}

    def add(n: int, codes: tuple[str, ...]) -> None:
        by_line[n] = (*by_line.get(n, ()), *codes)

    for i, line in enumerate(lines):
        m = _COMMENT.search(line)
        if m is None:
            continue
        raw = m.group("codes")
        if raw is None:
            codes = ALL
        else:
            codes = tuple(c.strip().upper() for c in raw.split(",") if c.strip())
        if not codes:
            continue  # ``ignore[]`` names nothing
        add(i + 1, codes)
        if _COMMENT_ONLY.match(line):
            j = i + 1
            while j < len(lines) and _COMMENT_ONLY.match(lines[j]):
                j += 1
            if j < len(lines):
                add(j + 1, codes)
                if _FENCE.match(lines[j]) and j + 1 < len(lines):
                    add(j + 2, codes)  # an HTML comment above a Markdown fence: its first line
    return Suppressions(by_line)

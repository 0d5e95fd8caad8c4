"""Finding, its location and fix, severities and the exit-status rule shared by every command."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from shmguard.model.fix import Change


class Severity(str, enum.Enum):
    """How bad a finding is. Ordered: info < warning < error."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error."""
        return ("info", "warning", "error").index(self.value)


class FailOn(str, enum.Enum):
    """``--fail-on`` threshold: exit 1 when a finding at or above it exists; ``never`` disables."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    NEVER = "never"


@dataclass(frozen=True)
class Location:
    """Where a finding points. Every field is optional.

    Attributes:
        file: a file path, or a host path such as ``/dev/shm``.
        line, column: 1-based start (column in characters).
        end_line, end_column: 1-based end, exclusive column, of the flagged text.
        start, end: byte offsets of the flagged text in the original file (``end`` exclusive),
            the span an :class:`Edit` replaces.
        path: the YAML/JSON path of the node (``spec.template.spec.volumes[1].emptyDir.sizeLimit``).
    """

    file: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    start: int | None = None
    end: int | None = None
    path: str | None = None


class Applicability(str, enum.Enum):
    """Whether a fix may be applied without a person looking (ruff's fix safety).

    * ``safe``: ``--fix`` applies it; the result means what the author meant, or adds a
      /dev/shm size from the sizing policy that fits inside the memory limit with its margin.
    * ``unsafe``: applied only on request (``--unsafe-fixes``): it changes behaviour beyond the
      finding (a memory limit raised, a setting moved to where it takes effect).
    * ``display-only``: shown, never applied (host changes, steps in words).
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``start:end`` of the original file with ``content`` (UTF-8 encoded).

    Offsets are into the file's bytes as read (before any decoding), so an edit never touches a
    byte outside its span: comments, quotes and line endings elsewhere survive.

    Raises:
        ValueError: for a negative offset or ``end`` < ``start``.
    """

    start: int
    end: int
    content: str

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"bad edit span {self.start}:{self.end}")


def apply_edits(data: bytes, edits: Iterable[Edit]) -> bytes:
    """``data`` with every edit applied, each against the original offsets.

    Raises:
        ValueError: two edits overlap (an insertion at the same offset as another edit's start
            counts as overlapping), or an edit ends past the data.
    """
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    out: list[bytes] = []
    pos = 0
    for i, e in enumerate(ordered):
        if e.end > len(data):
            raise ValueError(f"edit {e.start}:{e.end} ends past the data ({len(data)} bytes)")
        prev = ordered[i - 1] if i else None
        if prev is not None and (e.start < prev.end or e.start == prev.start):
            raise ValueError(f"edits overlap at byte {e.start}")
        out += [data[pos : e.start], e.content.encode()]
        pos = e.end
    out.append(data[pos:])
    return b"".join(out)


@dataclass(frozen=True)
class Fix:
    """How to fix a finding: a title, a sentence, setting changes as values, and edits.

    Attributes:
        title: one imperative line ("Give /dev/shm 1 GiB").
        description: the sentence(s) around the change: why this value, what else to do.
        changes: the settings to change, as values (:class:`~shmguard.model.fix.Change`);
            renderers turn them into each runtime's syntax, ``check --fix`` into edits.
        edits: in-place edits on the original file's bytes (config sources only).
        applicability: whether the edits may be applied without review.
    """

    title: str
    description: str = ""
    changes: tuple[Change, ...] = ()
    edits: tuple[Edit, ...] = ()
    applicability: Applicability = Applicability.DISPLAY_ONLY


@dataclass(frozen=True)
class Finding:
    """One problem. ``code`` is stable (``ENV0xx`` environment, ``SHM0xx`` config, never
    reused); ``name`` is the kebab-case rule name; ``message`` says what is wrong; ``why``
    says why it matters."""

    code: str
    name: str
    severity: Severity
    message: str
    why: str | None = None
    location: Location | None = None
    fix: Fix | None = None


def exit_status(findings: Iterable[Finding], fail_on: FailOn) -> int:
    """0 when no finding reaches ``fail_on``, else 1. (2 is reserved for usage/input errors.)"""
    if fail_on is FailOn.NEVER:
        return 0
    threshold = Severity(fail_on.value).rank
    return 1 if any(f.severity.rank >= threshold for f in findings) else 0

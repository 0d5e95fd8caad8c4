"""Per-file diagnostics of the sources layer: why a file, or part of one, was not read.

A source never raises to its caller for bad input: invalid YAML, an alias bomb, nesting too
deep, non-UTF-8 or binary bytes, a file over the size cap and unrendered templates each become
one :class:`SourceDiagnostic` value, and the other files still load.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DiagnosticKind(str, enum.Enum):
    """What went wrong with a file (stable names; ``check`` will map them to findings)."""

    INVALID_YAML = "invalid-yaml"
    INVALID_JSON = "invalid-json"
    ALIAS_BOMB = "alias-bomb"
    RECURSIVE_ALIAS = "recursive-alias"
    TOO_DEEP = "too-deep"
    NOT_UTF8 = "not-utf8"
    BINARY = "binary"
    TOO_LARGE = "too-large"
    TEMPLATE = "unrendered-template"
    UNREADABLE = "unreadable"
    #: a FIFO or device named by path that delivered nothing within ``--read-timeout``
    READ_TIMEOUT = "read-timeout"
    #: a symbolic link in a walk that loops (ELOOP)
    SYMLINK_LOOP = "symlink-loop"
    #: (info) a file ``--fix`` left unwritten on purpose: a symlink out of the walked tree
    NOT_WRITTEN = "not-written"


@dataclass(frozen=True)
class SourceDiagnostic:
    """One problem reading a file.

    Attributes:
        file: the path as given (``-`` for stdin).
        line, column: 1-based position of the problem, or None when it concerns the whole
            file (size cap, unreadable).
        message: one line, in plain words (the parser's own text where one exists).
        kind: the :class:`DiagnosticKind`.
        info: True when the file was skipped on purpose (an unrendered template) or left
            unwritten on purpose (``not-written``), not broken.
    """

    file: str
    line: int | None
    column: int | None
    message: str
    kind: DiagnosticKind
    info: bool = False

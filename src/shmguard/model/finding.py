"""Finding, its location and fix, severities and the exit-status rule shared by every command."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


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
    """Where a finding points: a file with 1-based line/column and a YAML/JSON path
    (``spec.template.spec.volumes[1].emptyDir.sizeLimit``), or a host path such as
    ``/dev/shm``. Every field is optional."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None


@dataclass(frozen=True)
class Snippet:
    """A ready-to-paste configuration fragment for one runtime.

    ``runtime`` is one of ``docker``, ``compose``, ``kubernetes``, ``ecs``, ``podman``;
    ``language`` is the fence language for Markdown (``shell``, ``yaml``, ``json``).
    """

    runtime: str
    title: str
    language: str
    text: str


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` of the original file (character offsets) with ``content``."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    """How to fix a finding: a sentence, config snippets, and optional in-place edits.

    ``applicability`` is ``safe`` (applied by ``--fix``), ``unsafe`` (only with
    ``--unsafe-fixes``) or ``display`` (shown, never applied).
    """

    description: str
    snippets: tuple[Snippet, ...] = ()
    edits: tuple[Edit, ...] = ()
    applicability: str = "display"


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

"""The policy engines ``shmguard policy`` writes for and what a failing pod gets, apart from
the generator (:mod:`shmguard.fleet.policy`) so the CLI can name them without loading it."""

from __future__ import annotations

import enum


class Engine(str, enum.Enum):
    """The policy engines :func:`generate` writes for."""

    KYVERNO = "kyverno"
    GATEKEEPER = "gatekeeper"
    VAP = "vap"


class Mode(str, enum.Enum):
    """What a failing pod gets: rejected, recorded, or a warning (and recorded)."""

    ENFORCE = "enforce"
    AUDIT = "audit"
    WARN = "warn"

"""A fact about the host that is either known or unknown with a reason. Never a guess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """A value read from the system, or ``None`` with the reason it could not be read.

    In JSON a known fact is its plain value; an unknown one is
    ``{"value": null, "reason": "..."}`` (docs/output.md).
    """

    value: T | None
    reason: str | None = None

    @classmethod
    def known(cls, value: T) -> Fact[T]:
        """A fact that was read."""
        return cls(value, None)

    @classmethod
    def unknown(cls, reason: str) -> Fact[T]:
        """A fact that could not be read, and why (one line, names the file or call)."""
        return cls(None, reason)

    @property
    def ok(self) -> bool:
        """True when the value was read (it may still be a legitimate ``None``-free value)."""
        return self.reason is None

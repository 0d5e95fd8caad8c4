"""`shmguard explain` (being built; see the issue tracker)."""

from __future__ import annotations

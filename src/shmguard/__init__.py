"""shmguard: find, measure, fix and prevent /dev/shm exhaustion in containerized PyTorch jobs.

The library never prints; :mod:`shmguard.cli` renders. Sizes are ``int`` bytes everywhere.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

"""``python -m shmguard``: the same as the ``shmguard`` console script."""

from __future__ import annotations

from shmguard.cli import main

if __name__ == "__main__":
    main()

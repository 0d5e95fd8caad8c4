"""The webhook's log: one compact JSON object per line on the ``shmguard.webhook`` logger
(decisions, errors, start and stop, certificate reloads), so a log collector parses every
line alike; nothing is printed, and no line spans two (a traceback goes to DEBUG only)."""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger("shmguard.webhook")


def json_line(record: object) -> str:
    """``record`` as compact JSON (no spaces after separators); values that JSON has no
    form for are written with ``str``. The webhook's one JSON style: its log lines, its
    response bodies and the JSONPatch inside them."""
    return json.dumps(record, separators=(",", ":"), default=str)


def log_json(level: int, **record: Any) -> None:
    """Log ``record`` as one :func:`json_line` at ``level``."""
    if log.isEnabledFor(level):
        log.log(level, json_line(record))

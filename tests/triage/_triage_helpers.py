"""Helpers shared by the triage tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmguard.triage import explain_streams
from shmguard.triage.model import Diagnosis, Signature

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def diagnose_text(text: str | bytes, catalogue: Sequence[Signature], **kwargs: Any) -> Diagnosis:
    """Diagnose one in-memory log named 'log'."""
    data = text.encode() if isinstance(text, str) else text
    return explain_streams([("log", io.BytesIO(data))], signatures=catalogue, **kwargs)

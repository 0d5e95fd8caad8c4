"""Helpers shared by the triage tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shmguard.triage import explain_streams
from shmguard.triage.model import Diagnosis, Signature

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
#: The public reports of issue 10 (format: tests/fixtures/corpus/README.md).
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def heldout_ids() -> set[str]:
    """The ids listed in the corpus's heldout.txt (comments left out)."""
    lines = (CORPUS / "heldout.txt").read_text().splitlines()
    return {x.strip() for x in lines if x.strip() and not x.startswith("#")}


def corpus_reports() -> dict[str, dict[str, Any]]:
    """Every corpus report (all reports_*.jsonl files, in name order), by id."""
    return {
        r["id"]: r
        for path in sorted(CORPUS.glob("reports_*.jsonl"))
        for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    }


def diagnose_text(text: str | bytes, catalogue: Sequence[Signature], **kwargs: Any) -> Diagnosis:
    """Diagnose one in-memory log named 'log'."""
    data = text.encode() if isinstance(text, str) else text
    return explain_streams([("log", io.BytesIO(data))], signatures=catalogue, **kwargs)

"""docs/signatures.md is generated from the catalogue and must stay equal to it."""

from __future__ import annotations

import os
from pathlib import Path

from shmguard.triage.catalogue_doc import render_markdown
from shmguard.triage.loader import builtin_dir, load_dir

DOC = Path(__file__).resolve().parents[2] / "docs" / "signatures.md"


def test_signatures_doc_is_current() -> None:
    text = render_markdown(load_dir(builtin_dir()))
    if os.environ.get("SHMGUARD_REGEN_DOCS") == "1":
        DOC.write_text(text)
    assert DOC.read_text() == text, (
        "docs/signatures.md is out of date: run "
        "SHMGUARD_REGEN_DOCS=1 python -m pytest tests/triage/test_signatures_docs.py"
    )


def test_every_signature_is_documented() -> None:
    text = DOC.read_text()
    for s in load_dir(builtin_dir()):
        assert f"### {s.id}\n" in text

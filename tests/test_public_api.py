"""The curated public API: every name in ``shmguard.__all__`` resolves, lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import shmguard

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_every_public_name_resolves_and_is_documented() -> None:
    doc = API_DOC.read_text()
    assert set(shmguard.__all__) == {"__version__", *shmguard._EXPORTS}
    for name in shmguard.__all__:
        assert getattr(shmguard, name) is not None
        assert f"`{name}`" in doc, f"docs/api.md does not list {name}"


def test_import_shmguard_loads_nothing_heavy() -> None:
    code = (
        "import sys, shmguard; "
        "print(','.join(m for m in ('shmguard.triage', 'shmguard.inspect', 'rich', 'yaml') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

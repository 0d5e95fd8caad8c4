"""Shared pytest fixtures: host fixture trees (tests/fixtures/hosts) for inspect and doctor."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

HOST_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hosts"


@pytest.fixture
def fixture_root(tmp_path: Path) -> Callable[[str], Path]:
    """Copy the host fixture tree ``name`` under tmp_path (adding its /dev/shm directory,
    which git cannot hold empty) and return its root."""

    def _load(name: str) -> Path:
        src = HOST_FIXTURES / name
        root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path))
        shutil.copytree(src, root, dirs_exist_ok=True)
        if json.loads((src / "scenario.json").read_text())["dev_shm"]:
            (root / "dev" / "shm").mkdir(parents=True, exist_ok=True)
        return root

    return _load

"""Helpers for doctor tests: host fixture trees copied under tmp_path, facts read from them."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.inspect.host import HostFacts, inspect_host
from shmguard.inspect.shm import statvfs_from_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


@pytest.fixture
def fixture_root(tmp_path: Path) -> Callable[[str], Path]:
    """Copy the host fixture tree ``name`` under tmp_path (adding its /dev/shm directory,
    which git cannot hold empty) and return its root."""

    def _load(name: str) -> Path:
        src = FIXTURES / name
        root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path))
        shutil.copytree(src, root, dirs_exist_ok=True)
        if json.loads((src / "scenario.json").read_text())["dev_shm"]:
            (root / "dev" / "shm").mkdir(parents=True)
        return root

    return _load


@pytest.fixture
def host(fixture_root: Callable[[str], Path]) -> Callable[..., HostFacts]:
    """``host(name, **kwargs)``: inspect_host over a copied fixture tree."""

    def _facts(name: str, **kwargs: object) -> HostFacts:
        root = fixture_root(name)
        return inspect_host(root, statvfs=statvfs_from_json(root), **kwargs)  # type: ignore[arg-type]

    return _facts

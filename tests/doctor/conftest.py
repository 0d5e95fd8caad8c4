"""Helpers for doctor tests: host fixture trees copied under tmp_path, facts read from them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.model.host import HostFacts


@pytest.fixture
def host(fixture_root: Callable[[str], Path]) -> Callable[..., HostFacts]:
    """``host(name, **kwargs)``: inspect_host over a copied fixture tree."""

    def _facts(name: str, **kwargs: object) -> HostFacts:
        root = fixture_root(name)
        return inspect_host(root, statvfs=statvfs_from_json(root), **kwargs)  # type: ignore[arg-type]

    return _facts

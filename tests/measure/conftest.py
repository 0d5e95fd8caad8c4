"""Fixtures for measure tests: root checks and "nothing left behind" assertions."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from measure_helpers import leftover_cgroups


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (private mount namespaces, cgroups)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test when it leaves cgroup directories behind."""
    before = leftover_cgroups()
    yield
    assert leftover_cgroups() == before

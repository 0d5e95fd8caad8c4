"""Fixtures for measure tests: root checks and "nothing left behind" assertions."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from measure_helpers import leftover_cgroups, own_cgroups


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (private mount namespaces, cgroups)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test when it leaves cgroup directories behind: its own, counted in cgroups made
    for the test (measure_helpers.own_cgroups), so another shmguard run creating and removing
    its sandboxes' cgroups at the same time is not counted; where those cannot be made, the
    listing under this process's cgroups before and after."""
    with own_cgroups() as mine:
        if mine is None:
            before = leftover_cgroups()
            yield
            assert leftover_cgroups() == before
            return
        yield
        left = sorted(str(p) for d in mine for p in d.glob("shmguard-*"))
        assert left == [], f"the test left cgroups behind: {left}"

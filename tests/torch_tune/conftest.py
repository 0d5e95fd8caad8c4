"""Fixtures for the tune tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (the trials' private tmpfs /dev/shm and cgroups)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")

"""Fixtures for the PyTorch guard's tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (the sandbox's private tmpfs /dev/shm)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")

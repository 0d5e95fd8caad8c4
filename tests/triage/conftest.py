"""Fixtures for the triage tests: the built-in catalogue, loaded once."""

from __future__ import annotations

import pytest

from shmguard.triage import load_catalogue
from shmguard.triage.model import Signature


@pytest.fixture(scope="session")
def catalogue() -> tuple[Signature, ...]:
    return load_catalogue()

"""Fixtures for the monitor tests: root checks and sandboxes with a private tmpfs /dev/shm."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from monitor_helpers import MiB

from shmguard.measure.sandbox import Sandbox, SandboxSpec


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (private mount namespaces for the sandbox's tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


@pytest.fixture
def shm_box() -> Iterator[Callable[[str], Sandbox]]:
    """Start a shell script in a sandbox with a private 64 MiB tmpfs /dev/shm (held until the
    caller releases it); every sandbox is killed at the end."""
    boxes: list[Sandbox] = []

    def start(script: str) -> Sandbox:
        box = Sandbox(SandboxSpec(("sh", "-c", script), 64 * MiB), output="capture")
        box.__enter__()
        boxes.append(box)
        box.start(hold=True)
        return box

    yield start
    for box in boxes:
        box.__exit__(None, None, None)

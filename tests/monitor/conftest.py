"""Fixtures for the monitor tests: root checks, a sandbox with a private tmpfs /dev/shm, and
reading a collector's samples."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shmguard.measure.sandbox import Sandbox, SandboxSpec

MiB = 1 << 20


@pytest.fixture
def root_only() -> None:
    """Skip unless running as root (private mount namespaces for the sandbox's tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")


def samples(collector: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(name, sorted extra labels): value}`` of one ``collect()`` (the constant labels
    namespace/pod/container left out of the key)."""
    out = {}
    for family in collector.collect():  # type: ignore[attr-defined]
        for s in family.samples:
            extra = tuple(
                sorted(
                    (k, v)
                    for k, v in s.labels.items()
                    if k not in ("namespace", "pod", "container")
                )
            )
            out[(s.name, extra)] = s.value
    return out


def value(collector: object, name: str, **labels: str) -> float | None:
    """One sample's value of one ``collect()``, or None when it is absent."""
    return samples(collector).get((name, tuple(sorted(labels.items()))))


def wait_for(check: Callable[[], bool], timeout: float = 20.0, every: float = 0.1) -> bool:
    """Poll ``check`` until it holds or ``timeout`` seconds pass; its last answer."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(every)
    return check()


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


def exists_in(box: Sandbox, name: str) -> Callable[[], bool]:
    """A check that ``name`` exists in the sandbox's /dev/shm."""
    return lambda: Path(box.shm_path, name).exists()

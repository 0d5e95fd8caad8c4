"""Helpers for the monitor tests: reading a collector's samples, waiting for a condition."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MiB = 1 << 20


def samples(collector: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(name, sorted extra labels): value}`` of one ``collect()`` (the constant labels
    namespace/pod/container left out of the key)."""
    out = {}
    constant = ("namespace", "pod", "container")
    for family in collector.collect():
        for s in family.samples:
            extra = tuple(sorted((k, v) for k, v in s.labels.items() if k not in constant))
            out[(s.name, extra)] = s.value
    return out


def value(collector: Any, name: str, **labels: str) -> float | None:
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


def exists_in(box: Any, name: str) -> Callable[[], bool]:
    """A check that ``name`` exists in the sandbox's /dev/shm."""
    return lambda: Path(box.shm_path, name).exists()


def recommend(*args: str) -> subprocess.CompletedProcess[str]:
    """``shmguard recommend ARGS`` in a subprocess, 200 columns wide; its text output."""
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "recommend", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )

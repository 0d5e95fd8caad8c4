"""The wheel as shipped: tests/packaging/wheel_smoke.py builds the sdist and wheel from a clean
copy of the checkout, installs the wheel (no deps, not editable) into a fresh venv and runs the
CLI from outside the source tree. Skipped where no build backend is importable offline."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("wheel_smoke.py")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("setuptools") is None, reason="no setuptools build backend"
    ),
]


def test_wheel_smoke_passes_in_a_fresh_venv() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--offline"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    steps = [line for line in proc.stdout.splitlines() if line.startswith("ok: ")]
    assert "ok: plan --format json valid against the shipped schema" in steps
    assert any(step.startswith("ok: explain ") for step in steps)
    assert len(steps) == 7, proc.stdout

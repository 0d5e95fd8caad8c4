"""A GPU count in Unicode digits (``nvidia.com/gpu: "²"``, ``--gpus ²``) is no count: check
reported it with a traceback (``int('²')``) before (issue 24 item 2's kind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shmguard.sources.detect import gpu_number, run_gpu_count

POD = (
    "{apiVersion: v1, kind: Pod, metadata: {name: t}, spec: {containers: [{name: t, "
    'image: pytorch/pytorch, resources: {limits: {nvidia.com/gpu: "%s"}}}]}}\n'
)


@pytest.mark.parametrize("value", ["²", "٣", "1" * 5000, "-1", "1.5", ""])
def test_not_a_count(value: str) -> None:
    assert gpu_number(value) is None
    assert run_gpu_count(value) is None
    assert run_gpu_count(f"count={value}") is None


def test_counts() -> None:
    assert gpu_number(" 2 ") == 2
    assert run_gpu_count("count=1") == 1
    assert run_gpu_count('"device=0,1"') == 2


@pytest.mark.parametrize("name", ["pod.yaml", "run.sh"])
def test_check_reports_it_without_a_traceback(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    text = POD % "²" if name == "pod.yaml" else "docker run --gpus ² pytorch/pytorch python t.py\n"
    f.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert "SHM001" in done.stdout

"""README's first two commands: what they install, checked by running their shell logic with
stand-in `python3` and `shmguard` programs (no network, nothing installed)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
GUARD = (
    "python3 -c 'import torch' 2>/dev/null || python3 -m pip install torch==2.13.0 "
    "--index-url https://download.pytorch.org/whl/cpu && "
)
CPU_INDEX = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$LOG"
if [ "$1" = "-c" ] && [ -n "$NO_TORCH" ]; then exit 1; fi
exit 0
"""


def commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", README, re.S)


def test_readme_starts_with_the_two_commands() -> None:
    starts = [m.start() for m in re.finditer("```", README)]
    assert len(starts) >= 4 and starts[3] < README.index("\n## ")  # both before any section
    demo, tests = commands()[:2]
    assert demo == GUARD + "python3 -m pip install -e '.[torch]' && shmguard demo"
    assert tests == GUARD + "python3 -m pip install -e '.[torch,dev,plot]' && python3 -m pytest -q"
    # torch==2.13.0 is the CPU build only from PyTorch's CPU index (on PyPI it is CUDA)
    assert "that is the CPU wheel" not in README


@pytest.mark.parametrize("has_torch", [True, False])
def test_the_commands_keep_an_installed_torch_or_install_the_cpu_wheel(
    tmp_path: Path, has_torch: bool
) -> None:
    for name in ("python3", "shmguard"):
        fake = tmp_path / name
        fake.write_text(FAKE)
        fake.chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "LOG": str(log)}
    if not has_torch:
        env["NO_TORCH"] = "1"
    for command in commands()[:2]:
        log.write_text("")
        done = subprocess.run(["sh", "-c", command], env=env, timeout=30, check=False)
        assert done.returncode == 0
        calls = log.read_text().splitlines()
        assert calls[0] == "python3 -c import torch"
        installs_torch = [c for c in calls if "install torch" in c]
        if has_torch:
            assert installs_torch == []  # the torch already there is used
        else:
            assert installs_torch == [f"python3 -m {CPU_INDEX}"]
        assert calls[-1] in ("shmguard demo", "python3 -m pytest -q")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\"$PY\" -m pip install -q -e '.[torch,dev,plot]'" in ci
    assert '"$PY" -m pytest -q' in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)

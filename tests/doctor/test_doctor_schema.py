"""Real `shmguard doctor --json` output validates against the packaged JSON Schema."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from schema_registry import validator

pytestmark = pytest.mark.timeout(120)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "scenario.json").is_file())


@pytest.fixture(scope="module", name="validator")
def doctor_validator() -> jsonschema.protocols.Validator:
    return validator("doctor")


def doctor_json(*args: str) -> dict:
    exe = Path(sys.executable).with_name("shmguard")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "shmguard"]
    out = subprocess.run(
        [*cmd, "doctor", "--json", "--fail-on", "never", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_live_output_validates(validator):
    validator.validate(doctor_json())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fixture_output_validates(validator, scenario, tmp_path):
    root = tmp_path / scenario
    shutil.copytree(FIXTURES / scenario, root)
    if json.loads((root / "scenario.json").read_text())["dev_shm"]:
        (root / "dev/shm").mkdir(parents=True, exist_ok=True)
    doc = doctor_json("--root", str(root), "--require", "1g")
    validator.validate(doc)
    assert doc["findings"], "every fixture host has at least one finding"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
def test_pid_output_validates(validator):
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
         "mount -t tmpfs -o size=64m tmpfs /dev/shm && echo ready && exec cat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        # `cat` replaced the shell (exec), so unshare's child is the process in the namespace.
        child = int(Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()[0])
        doc = doctor_json("--pid", str(child))
        validator.validate(doc)
        assert doc["facts"]["pid"] == child
        assert doc["facts"]["shm"]["total"] == 67108864
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
        holder.stdout.close()  # type: ignore[union-attr]

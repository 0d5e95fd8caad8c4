"""`shmguard check --format sarif|github`, `--baseline` / `--create-baseline` end to end (in
process): valid SARIF, annotations, the baseline file and exit statuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from schema_registry import validator
from shmguard.cli import app

FIXTURES = Path(__file__).parent / "fixtures"
TESTS = Path(__file__).resolve().parents[2]
SARIF = json.loads((TESTS / "fixtures" / "schemas" / "sarif-schema-2.1.0.json").read_text())
CHECK = validator("check")

COMPOSE = """\
services:
  train:
    image: pytorch/pytorch:2.3.0
  serve:
    image: nginx
    shm_size: 2Gi
"""


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_sarif_of_the_fixtures_validates() -> None:
    code, out, _ = run("check", "--format", "sarif", str(FIXTURES))
    log = json.loads(out)
    jsonschema.Draft4Validator(SARIF).validate(log)
    results = log["runs"][0]["results"]
    assert code == 1 and len(results) == 22
    assert {r["level"] for r in results} == {"error", "warning"}
    # a fix exactly where the JSON output has applicable edits
    _, out, _ = run("check", "--json", str(FIXTURES))
    fixable = [
        (f["code"], f["location"]["start"])
        for file in json.loads(out)["files"]
        for f in file["findings"]
        if f["fix"] and f["fix"]["edits"] and f["fix"]["applicability"] != "display-only"
    ]
    with_fixes = [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["byteOffset"])
        for r in results
        if "fixes" in r
    ]
    assert with_fixes == fixable and len(fixable) == 11  # 8, the k8s SHM001, SHM008, SHM013


def test_github_annotations_and_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("compose.yaml").write_text(COMPOSE)
    code, out, _ = run("check", "--format", "github", "compose.yaml")
    # ':' and ',' in the message stay (only properties escape them); the fix hint is a new line
    assert out.splitlines() == [
        "::warning file=compose.yaml,line=2,endLine=2,col=3,endColumn=8,title=SHM001::service "
        "'train' is an ML workload (image pytorch/pytorch:2.3.0 (pytorch)) with no shm_size: it "
        "gets Docker's 64 MiB /dev/shm (Podman: 65,536,000 bytes)%0Afix (safe): Add "
        'shm_size: "1g"',
        "::error file=compose.yaml,line=6,endLine=6,col=15,endColumn=18,title=SHM002::shm_size: "
        "'2Gi' has a Kubernetes suffix: Compose v2 (compose-go) and Docker CLI 23+ reject it "
        "(invalid suffix: 'gi'), Compose v1 stops with a traceback; write 2g"
        "%0Afix (safe): Write 2g",
        "2 findings (1 error, 1 warning, 0 info) in 1 file",
    ]
    assert code == 1


def test_json_and_format_conflict_and_format_json() -> None:
    code, _, err = run("check", "--json", "--format", "sarif", str(FIXTURES))
    assert code == 2 and "--json and --format sarif ask for two outputs" in err
    code, out, _ = run("check", "--format", "JSON", str(FIXTURES / "pod_good.yaml"))
    doc = json.loads(out)
    CHECK.validate(doc)
    assert code == 0 and doc["summary"]["baselined"] == 0


def test_create_baseline_then_only_new_findings_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("compose.yaml").write_text(COMPOSE)
    code, out, _ = run("check", "--create-baseline", "base.json", "compose.yaml")
    assert code == 0
    assert (
        out.splitlines()[-1]
        == "0 findings (0 errors, 0 warnings, 0 info) in 1 file; 2 in the baseline"
    )
    base = json.loads(Path("base.json").read_text())
    assert base["schema"] == "shmguard.baseline/1"
    assert [(e["file"], e["code"], e["path"], e["value"]) for e in base["findings"]] == [
        ("compose.yaml", "SHM001", "services.train", "train"),
        ("compose.yaml", "SHM002", "services.serve.shm_size", "2Gi"),
    ]
    # lines inserted above: still known, exit 0
    Path("compose.yaml").write_text("# deployment for the trainer\n\n" + COMPOSE)
    code, out, _ = run("check", "--baseline", "base.json", "compose.yaml")
    assert code == 0 and out.endswith("; 2 in the baseline\n")
    # a new finding is reported, and only it counts
    Path("compose.yaml").write_text(COMPOSE + "  extra:\n    image: vllm/vllm-openai:v0.6.0\n")
    code, out, _ = run("check", "--json", "--baseline", "base.json", "compose.yaml")
    doc = json.loads(out)
    CHECK.validate(doc)
    assert code == 1
    assert [f["location"]["path"] for f in doc["files"][0]["findings"]] == ["services.extra"]
    assert (doc["summary"]["warning"], doc["summary"]["baselined"]) == (1, 2)


def test_bad_baseline_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run("check", "--baseline", str(tmp_path / "none.json"), str(FIXTURES))
    assert code == 2 and "cannot read the baseline" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other"}')
    code, _, err = run("check", "--baseline", str(bad), str(FIXTURES))
    assert (
        code == 2
        and err
        == f"shmguard: error: {bad}: not a shmguard baseline "
        "(schema shmguard.baseline/1 expected)\n"
    )


def test_fix_then_baseline_of_what_is_left(tmp_path: Path) -> None:
    work = tmp_path / "compose.yaml"
    shutil.copy(FIXTURES / "compose_bad.yaml", work)
    code, _, _ = run("check", "--fix", "--create-baseline", str(tmp_path / "b.json"), str(work))
    left = json.loads((tmp_path / "b.json").read_text())["findings"]
    assert code == 0
    # the safe fixes (SHM019, SHM002) were applied; the baseline holds what is left
    assert sorted(e["code"] for e in left) == ["SHM011", "SHM012", "SHM023"]
    fixed = work.read_text()
    assert '  train:\n    shm_size: "8g"\n' in fixed and 'shm_size: "2g"' in fixed

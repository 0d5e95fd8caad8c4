"""``check`` from the library (:func:`shmguard.check_paths`) and from the CLI (``shmguard check
--format json``) give the same findings: codes, files, lines, messages and fixes, the webhook
coverage of a kubectl stream, the diagnostics of unreadable files, baselines, fixes. Over the
rule fixtures and the files bundled here always, and over ../shared/corpus when it is present;
and the report does not depend on ``jobs``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import shmguard
from shmguard.config import load_config
from shmguard.lint.baseline import parse_baseline
from shmguard.lint.check import check_loaded
from shmguard.lint.report import CheckReport, check_paths
from shmguard.render.json import to_data
from shmguard.render.json_bodies import baseline_json, check_json
from shmguard.sources.load import load_path

HERE = Path(__file__).parent
CORPUS = HERE.parents[1] / ".." / "shared" / "corpus"
STREAM = HERE / "fixtures_check" / "kubectl_get_with_webhook.yaml"
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="--jobs uses fork, on Linux only"
)


def _tree(root: Path) -> Path:
    """The rule fixtures (Compose, Kubernetes, run lines), the webhook stream and files that
    cannot be read."""
    for name in ("fixtures", "fixtures_rules_b"):
        shutil.copytree(HERE / "config" / name, root / name)
    shutil.copy(STREAM, root / STREAM.name)
    bad = root / "bad"
    bad.mkdir()
    (bad / "invalid.yaml").write_text("services:\n  a: [1, 2\n")
    (bad / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (bad / "helm.yaml").write_text("spec:\n  replicas: {{ .Values.replicas }}\n")
    return root


def _cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return r.returncode, r.stdout, r.stderr


def _findings(files: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per finding: file, code, severity, line, column, message, location and fix (as JSON
    text)."""
    out = []
    for entry in files:
        for f in entry["findings"]:
            loc = f["location"] or {}
            out.append(
                (
                    entry["file"],
                    f["code"],
                    f["severity"],
                    loc.get("line"),
                    loc.get("column"),
                    f["message"],
                    json.dumps(loc, sort_keys=True),
                    json.dumps(f["fix"], sort_keys=True),
                )
            )
    return out


def _library_files(report: CheckReport) -> list[dict[str, Any]]:
    """The report's files as plain data, without check's JSON serializer."""
    return [
        {
            "file": r.path,
            "kind": r.kind,
            "findings": to_data(r.findings),
            "diagnostics": [to_data(d) for d in r.diagnostics],
        }
        for r in report.results
    ]


def _same(report: CheckReport, cli: tuple[int, str, str]) -> dict[str, Any]:
    code, out, _ = cli
    doc = json.loads(out)
    assert _findings(_library_files(report)) == _findings(doc["files"])
    assert [(f["file"], f["kind"], f["diagnostics"]) for f in doc["files"]] == [
        (f["file"], f["kind"], f["diagnostics"]) for f in _library_files(report)
    ]
    assert report.exit_status == code == doc["summary"]["exit_status"]
    assert check_json(report) + "\n" == out  # and the whole document
    return doc


def test_library_and_cli_give_the_same_findings(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "files")
    report = check_paths([str(tree)])
    doc = _same(report, _cli(str(tree), cwd=tmp_path))
    assert doc["summary"]["files"] == len(report.files) >= 8
    assert report.exit_status == 2  # the unreadable files
    messages = [f.message for f in report.findings]
    # the webhook-coverage step ran in both: a covered finding (info, no fix) and an admitted
    # pod's, where the bare rule engine over the same file has neither
    covered = [f for f in report.findings if "covered by the shmguard webhook" in f.message]
    assert len(covered) == 1 and covered[0].severity.value == "info" and covered[0].fix is None
    assert any("was admitted without a /dev/shm" in m for m in messages)
    bare = check_loaded(load_path(str(tree / STREAM.name)))
    assert not any("shmguard webhook" in f.message for f in bare.findings)
    assert {f.code for f in report.findings} >= {"SHM001", "SHM008"}


def test_the_configuration_select_and_fail_on_are_the_same(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "files")
    conf_file = tmp_path / ".shmguard.toml"
    conf_file.write_text('fail-on = "error"\nignore = ["SHM008"]\n')
    conf = load_config(path=conf_file)
    report = check_paths([str(tree)], config=conf)
    doc = _same(report, _cli("--config", str(conf_file), str(tree), cwd=tmp_path))
    assert doc["summary"]["fail_on"] == "error" and doc["summary"]["config"] == str(conf_file)
    assert "SHM008" not in {f.code for f in report.findings}


def test_baselines_are_the_same(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "files")
    base = tmp_path / "base.json"
    made = check_paths([str(tree)], create_baseline=True)
    assert made.findings == () and made.baselined > 0 and made.new_baseline
    cli = _cli("--create-baseline", str(base), str(tree), cwd=tmp_path)
    assert json.loads(cli[1])["summary"]["baselined"] == made.baselined
    assert check_json(made) + "\n" == cli[1]
    known = parse_baseline(base.read_text(), str(base))
    (tree / "fixtures" / "pod_bad.yaml").rename(tree / "fixtures" / "moved.yaml")
    used = check_paths([str(tree)], baseline=known)
    assert 0 < len(used.findings) < len(check_paths([str(tree)]).findings)
    _same(used, _cli("--baseline", str(base), str(tree), cwd=tmp_path))
    # the library writes the same baseline file the CLI wrote
    assert made.new_baseline is not None
    assert baseline_json(made.new_baseline) + "\n" == base.read_text()


def test_fixes_and_diffs_are_the_same(tmp_path: Path) -> None:
    trees = [_tree(tmp_path / "lib"), _tree(tmp_path / "cli")]
    diffed = check_paths([str(trees[0])], diff=True, unsafe=True)
    assert diffed.fixed > 0 and not diffed.written
    assert any(c.fixed_data is not None for c in diffed.files)
    cli = _cli("--diff", "--unsafe-fixes", str(trees[0]), cwd=tmp_path)
    assert json.loads(cli[1])["summary"]["fixed"] == diffed.fixed
    fixed = check_paths([str(trees[0])], fix=True, unsafe=True)
    cli = _cli("--fix", "--unsafe-fixes", str(trees[1]), cwd=tmp_path)
    assert fixed.fixed == json.loads(cli[1])["summary"]["fixed"] == diffed.fixed
    assert len(fixed.repaired) == fixed.fixed
    files = sorted(p.relative_to(trees[0]) for p in trees[0].rglob("*") if p.is_file())
    assert all((trees[0] / f).read_bytes() == (trees[1] / f).read_bytes() for f in files)
    again = check_paths([str(trees[0])])
    _same(again, _cli(str(trees[0]), cwd=tmp_path))


def test_a_failed_write_is_in_the_report_and_on_the_cli_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from typer.testing import CliRunner

    import shmguard.lint.check
    from shmguard.cli import app

    def read_only(path: str, data: bytes) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(shmguard.lint.check, "write_atomic", read_only)
    tree = _tree(tmp_path / "files")
    report = check_paths([str(tree)], fix=True)
    failed = [c.write_error for c in report.files if c.write_error is not None]
    assert failed and all(w.endswith(": cannot write: Read-only file system") for w in failed)
    assert report.exit_status == 2 and report.repaired == () and report.fixed > 0
    r = CliRunner().invoke(app, ["check", "--fix", "--format", "json", str(tree)])
    assert r.exit_code == 2
    assert [f"shmguard: error: {w}" for w in failed] == r.stderr.splitlines()[: len(failed)]
    assert r.stdout == check_json(report) + "\n"


@linux_only
def test_the_report_does_not_depend_on_jobs(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "files")
    # more files than FILES_PER_JOB (64) per process, so jobs 0 forks on two CPUs too
    for i in range(12):
        shutil.copytree(tree / "fixtures", tree / "copies" / str(i))
    for keep in (False, True):
        one = check_paths([str(tree)], jobs=1, keep_sources=keep)
        two = check_paths([str(tree)], jobs=2, keep_sources=keep)
        assert one == two
        assert bool(one.sources) is keep
    assert len(one.files) > 64 and one.findings
    assert check_paths([str(tree)], jobs=3, diff=True) == check_paths(
        [str(tree)], jobs=1, diff=True
    )


def test_the_public_name_and_one_path(tmp_path: Path) -> None:
    assert shmguard.check_paths is check_paths and shmguard.CheckReport is CheckReport
    tree = _tree(tmp_path)
    assert check_paths(tree) == check_paths(str(tree)) == check_paths([str(tree)])


@pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
def test_corpus_library_and_cli_give_the_same_findings(tmp_path: Path) -> None:
    report = check_paths([str(CORPUS)])
    doc = _same(report, _cli(str(CORPUS), cwd=tmp_path))
    assert doc["summary"]["files"] == len(report.files) > 1000
    assert len(report.findings) > 100

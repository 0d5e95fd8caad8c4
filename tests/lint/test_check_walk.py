"""`shmguard check DIR` walks a tree as ruff and yamllint do (issue 21 item 1, issue 24 items 1,
2, 6 and 8): what cannot be read as text is skipped and counted in a walk and an error when
named; unreadable directories and symlink loops are errors in every format; exclusions; --fix
never writes through a symlink out of the tree, and keeps hard links. Real files in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schema_registry import validator
from shmguard.cli import app
from shmguard.lint.report import check_paths
from shmguard.sources.text import MAX_BYTES

SRC = Path(__file__).resolve().parents[2] / "src"
CHECK = validator("check")
COMPOSE = "services:\n  train:\n    image: pytorch/pytorch:2.3.0\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _ml_repo(root: Path) -> None:
    """An ML repository: a logo, a checkpoint, a tarball shard, a 17 MiB CSV, one compose."""
    (root / "docs").mkdir()
    (root / "docs" / "logo.png").write_bytes(PNG)
    (root / "model.pt").write_bytes(b"PK\x03\x04" + b"\x00" * 64 + b"archive/data.pkl")
    (root / "data").mkdir()
    (root / "data" / "shard-000.tar").write_bytes(b"train.jsonl" + b"\x00" * 512)
    with open(root / "data" / "labels.csv", "wb") as fh:
        row = b"00000001,cat,0.97\n"
        fh.write(row * (17 * 1024 * 1024 // len(row) + 1))
    (root / "compose.yaml").write_text(COMPOSE)


def test_ml_repository_exits_by_its_findings_and_says_what_it_skipped(tmp_path: Path) -> None:
    _ml_repo(tmp_path)
    assert (tmp_path / "data" / "labels.csv").stat().st_size > MAX_BYTES
    code, out, err = run("check", str(tmp_path))
    assert err == ""
    assert out.splitlines()[-1] == (
        "1 finding (0 errors, 1 warning, 0 info) in 1 file; 4 files skipped: binary 3, too large 1"
    )
    assert code == 1
    code, out, _ = run("check", "--json", str(tmp_path))
    doc = json.loads(out)
    CHECK.validate(doc)
    assert doc["summary"]["skipped"] == {"binary": 3, "too-large": 1}
    assert sorted((Path(s["file"]).name, s["reason"]) for s in doc["skipped"]) == [
        ("labels.csv", "too-large"),
        ("logo.png", "binary"),
        ("model.pt", "binary"),
        ("shard-000.tar", "binary"),
    ]
    assert doc["summary"]["exit_status"] == 1 and code == 1
    # only the compose file matters: without it, exit 0
    (tmp_path / "compose.yaml").unlink()
    code, out, _ = run("check", str(tmp_path))
    assert code == 0 and out.endswith("in 0 files; 4 files skipped: binary 3, too large 1\n")


@pytest.mark.parametrize("name", ["model.pt", "docs/logo.png", "data/labels.csv"])
def test_named_unreadable_files_are_errors(tmp_path: Path, name: str) -> None:
    _ml_repo(tmp_path)
    code, out, err = run("check", str(tmp_path / name))
    assert code == 2
    assert err.startswith("shmguard: error: ") and err.count("error:") == 1
    assert ": binary:" in err or ": too-large:" in err
    # the file named is not counted as checked: it could not be read
    assert out.endswith(" in 0 files; 1 file with errors (on stderr)\n")


def test_fifo_and_device_in_a_walk_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    os.mkfifo(tmp_path / "pipe.yaml")  # no writer: reading it would hang
    (tmp_path / "null.yaml").symlink_to("/dev/null")
    t0 = time.monotonic()
    code, out, _ = run("check", str(tmp_path))
    assert time.monotonic() - t0 < 10
    assert out.splitlines()[-1].endswith("in 1 file; 2 files skipped: device 1, FIFO 1")
    assert code == 1


def _py(code: str, *args: str, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-c", code, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=stdin, timeout=120)


#: Runs ``shmguard check ARGS`` as a child and prints its exit status and peak RSS (bytes).
_PEAK = """
import resource, subprocess, sys
p = subprocess.run([sys.executable, "-m", "shmguard", "check", *sys.argv[1:]],
                   capture_output=True, text=True)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
print(p.stderr)
"""


def test_dev_zero_named_is_refused_in_bounded_memory() -> None:
    got = _py(_PEAK, "/dev/zero")
    code, peak = map(int, got.stdout.split()[:2])
    assert code == 2 and "shmguard: error: /dev/zero: binary" in got.stdout
    assert peak < 200 * 2**20, peak  # it grew to 8.1 GB before the bounded reader


def test_endless_standard_input_is_refused_in_bounded_memory() -> None:
    yes = subprocess.Popen(["yes", "a: b"], stdout=subprocess.PIPE)
    try:
        assert yes.stdout is not None
        got = _py(_PEAK, "/dev/stdin", stdin=yes.stdout.fileno())
    finally:
        yes.kill()
        yes.wait()
    code, peak = map(int, got.stdout.split()[:2])
    assert code == 2 and "too-large: input goes past the 16,777,216-byte limit" in got.stdout
    assert peak < 200 * 2**20, peak  # 1.8 GB before


def test_named_fifo_without_writer_is_an_error_after_the_timeout(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.yaml")
    t0 = time.monotonic()
    code, _, err = run("check", "--read-timeout", "0.5", str(tmp_path / "f.yaml"))
    assert time.monotonic() - t0 < 10
    assert code == 2
    assert ": read-timeout: no data for 0.5 s" in err and err.count("error:") == 1


def test_symlink_loop_is_an_error_in_every_format_and_the_rest_is_checked(tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    code, out, err = run("check", str(tmp_path))
    assert code == 2
    assert f"shmguard: error: {tmp_path / 'loop.yaml'}: symlink-loop: symbolic link loop" in err
    assert "compose.yaml:2:3: SHM001" in out
    code, out, _ = run("check", "--json", str(tmp_path))
    doc = json.loads(out)
    CHECK.validate(doc)
    kinds = {Path(f["file"]).name: [d["kind"] for d in f["diagnostics"]] for f in doc["files"]}
    assert kinds == {"compose.yaml": [], "loop.yaml": ["symlink-loop"]}
    assert doc["summary"]["exit_status"] == 2 and doc["summary"]["warning"] == 1
    code, out, _ = run("check", "--format", "sarif", str(tmp_path))
    (inv,) = json.loads(out)["runs"][0]["invocations"]
    assert any(
        "symbolic link loop" in n["message"]["text"] for n in inv["toolExecutionNotifications"]
    )
    assert code == 2


_DROPPED = """
import os, sys
from shmguard.lint.report import check_paths
from shmguard.render.json_bodies import check_json
check_json(check_paths(sys.argv[1]))  # import what a check needs while it can be read
os.setgroups([]); os.setgid(65534); os.setuid(65534)  # nobody: a mode-000 dir is closed
r = check_paths(sys.argv[1])
print(r.exit_status, len(r.findings))
for c in r.files:
    for d in c.result.diagnostics:
        print(os.path.basename(d.file), d.kind.value, d.message)
"""


@pytest.mark.skipif(os.getuid() != 0, reason="drops to uid 65534 to make a directory unreadable")
def test_unreadable_directory_is_an_error_not_a_quiet_exit_0() -> None:
    # root reads a mode-000 directory: the check runs as nobody, in a directory nobody can reach
    # (tmp_path is under a 0700 directory)
    root = Path(tempfile.mkdtemp(prefix="shmguard-walk-"))
    try:
        root.chmod(0o755)
        (root / "ok").mkdir()
        (root / "ok" / "compose.yaml").write_text(COMPOSE)
        (root / "ok").chmod(0o755)
        (root / "ok" / "compose.yaml").chmod(0o644)
        (root / "locked").mkdir(mode=0o000)
        (root / "locked").chmod(0o000)
        got = _py(_DROPPED, str(root))
        lines = got.stdout.splitlines()
        assert lines[0] == "2 1", got.stderr  # exit 2; the readable compose file's finding
        assert lines[1:] == [
            "locked unreadable cannot read directory: Permission denied; its files were not checked"
        ]
    finally:
        (root / "locked").chmod(0o755)
        for p in sorted(root.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        root.rmdir()


def test_utf16_yaml_is_checked_and_fixed_in_utf16(tmp_path: Path) -> None:
    f = tmp_path / "compose.yaml"
    f.write_bytes(b"\xff\xfe" + COMPOSE.encode("utf-16-le"))
    code, out, err = run("check", str(tmp_path))
    assert err == "" and "compose.yaml:2:3: SHM001" in out and code == 1
    code, out, _ = run("check", "--fix", str(f))
    data = f.read_bytes()
    assert data.startswith(b"\xff\xfe")
    assert 'shm_size: "1g"' in data[2:].decode("utf-16-le")
    assert run("check", str(f))[0] == 0


def test_exclude_options_and_configuration(tmp_path: Path) -> None:
    for d in ("deploy", "vendor", "node_modules", "charts/a/tests"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "compose.yaml").write_text(COMPOSE)

    def files(*args: str, cwd: Path = tmp_path) -> list[str]:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            _, out, _ = run("check", "--json", *args)
        finally:
            os.chdir(old)
        found = (os.path.normpath(f["file"]) for f in json.loads(out)["files"])
        return sorted(f for f in found if f.endswith("compose.yaml"))

    every = ["charts/a/tests/compose.yaml", "deploy/compose.yaml", "vendor/compose.yaml"]
    assert files(".") == every  # node_modules: ruff's default exclude
    assert files(".", "--extend-exclude", "vendor") == every[:2]
    assert files(".", "--extend-exclude", "charts/*/tests") == every[1:]
    # --exclude replaces the default list
    assert files(".", "--exclude", "deploy") == [every[0], "node_modules/compose.yaml", every[2]]
    (tmp_path / ".shmguard.toml").write_text('extend-exclude = ["vendor", "charts/*/tests"]\n')
    assert files(".") == ["deploy/compose.yaml"]
    # named paths are checked even when excluded, unless --force-exclude (pre-commit)
    assert files("vendor/compose.yaml") == ["vendor/compose.yaml"]
    assert files("--force-exclude", "vendor/compose.yaml", "deploy/compose.yaml") == [
        "deploy/compose.yaml"
    ]
    (tmp_path / ".shmguard.toml").write_text('extend-exclude = ["vendor"]\nforce-exclude = true\n')
    assert files("vendor/compose.yaml", "node_modules/compose.yaml") == []
    (tmp_path / ".shmguard.toml").write_text("exclude = []\n")
    assert files(".") == [every[0], every[1], "node_modules/compose.yaml", every[2]]


def test_gitignore_is_still_respected(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "compose.yaml").write_text(COMPOSE)
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    report = check_paths(tmp_path, extend_exclude=["nothing"])
    assert [c.result.path for c in report.files] == [
        str(tmp_path / ".gitignore"),
        str(tmp_path / "compose.yaml"),
    ]


def test_fix_never_writes_through_a_symlink_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "home" / ".bashrc"
    outside.parent.mkdir()
    script = "docker run --gpus all pytorch/pytorch:2.3.0 python train.py\n"
    outside.write_text(script)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "setup.sh").symlink_to(outside)
    (repo / "inside.sh").write_text(script)
    (repo / "sub").mkdir()
    (repo / "sub" / "link.sh").symlink_to("../inside.sh")  # inside the tree: may be written
    code, out, err = run("check", "--fix", str(repo))
    assert outside.read_text() == script  # never written
    assert "--shm-size" in (repo / "inside.sh").read_text()
    assert f"{repo / 'setup.sh'}: info: not-written: not fixed: a symbolic link to {outside}" in err
    assert f"{repo / 'setup.sh'}:1:1: SHM001" in out  # its findings reported
    assert code == 1


def test_fix_keeps_hard_links(tmp_path: Path) -> None:
    a = tmp_path / "a" / "compose.yaml"
    a.parent.mkdir()
    a.write_text(COMPOSE)
    b = tmp_path / "b.yaml"
    os.link(a, b)
    ino = a.stat().st_ino
    code, out, _ = run("check", "--fix", str(a))
    assert "1 fixed" in out and code == 0
    assert a.stat().st_ino == ino and a.stat().st_nlink == 2
    assert b.read_text() == a.read_text() and 'shm_size: "1g"' in b.read_text()
    assert [p.name for p in a.parent.iterdir()] == ["compose.yaml"]  # no copy left behind

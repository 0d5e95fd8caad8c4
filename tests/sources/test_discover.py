"""File discovery: .gitignore respected with git and without it; ``-`` passed through."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from shmguard.sources.discover import discover
from shmguard.sources.load import load_path


def _tree(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "build").mkdir()
    (root / ".gitignore").write_text("*.log\nbuild/\n/top.yaml\n!keep.log\n")
    for name in ("a.yaml", "top.yaml", "x.log", "keep.log", "sub/top.yaml", "build/b.yaml"):
        (root / name).write_text("a: 1\n")


def _rel(root: Path, found: list[str]) -> list[str]:
    return sorted(Path(f).relative_to(root).as_posix() for f in found)


EXPECTED = [".gitignore", "a.yaml", "keep.log", "sub/top.yaml"]


def test_plain_gitignore_reader(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert _rel(tmp_path, list(discover([str(tmp_path)]))) == EXPECTED
    assert list(discover(["-"])) == ["-"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_check_ignore(tmp_path: Path) -> None:
    _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "sub" / ".gitignore").write_text("top.yaml\n")
    found = _rel(tmp_path, list(discover([str(tmp_path)])))
    assert found == [".gitignore", "a.yaml", "keep.log", "sub/.gitignore"]


def test_files_only_sniffed_as_yaml_that_do_not_parse_are_text(tmp_path: Path) -> None:
    # pyproject.toml starts with "[": it looks like a YAML flow sequence, but it is TOML.
    (tmp_path / "pyproject.toml").write_text('[tool.shmguard]\nselect = ["SHM"]\n')
    (tmp_path / "notes").write_text("[setup]\ndocker run --rm img python train.py\n")
    (tmp_path / "bad.yaml").write_text("a: {b: 1\n")
    kinds = {Path(p).name: load_path(p) for p in discover([str(tmp_path)])}
    assert kinds["pyproject.toml"].kind == "text" and not kinds["pyproject.toml"].diagnostics
    assert kinds["notes"].kind == "run-lines"
    assert kinds["bad.yaml"].kind != "text" and kinds["bad.yaml"].diagnostics

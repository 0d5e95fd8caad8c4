"""The console entry point's fast path for ``shmguard check`` (shmguard.cli._fast): the keyword
arguments it gives the command are the ones Typer gives, and what it does not take goes to
Typer (help, usage errors)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from shmguard.cli import _fast, app
from shmguard.cli import check as command

DEFAULTS = {k: p.default for k, p in inspect.signature(command.check).parameters.items()}

TAKEN = [
    ["a.yaml"],
    ["a.yaml", "-", "dir"],
    ["--jobs", "1", "--force-exclude", "a.yaml", "b.yaml"],
    ["-j", "007", "a.yaml"],
    ["--jobs=3", "a.yaml"],
    ["a.yaml", "--fail-on", "ERROR", "--format", "Json"],
    ["--fail-on=never", "--json", "a.yaml"],
    ["--select", "SHM001,shm008", "--select=SHM010", "--ignore", "SHM002", "a.yaml"],
    ["--exclude", "build", "--extend-exclude", "*.j2", "--extend-exclude=x", "a"],
    ["--fix", "--unsafe-fixes", "a.yaml"],
    ["--diff", "--target", "compose=v1", "a.yaml"],
    ["--config", "cfg.toml", "a.yaml"],
    ["--format", "sarif", "a.yaml"],
]

LEFT_TO_TYPER = [
    [],
    ["--json"],
    ["--help", "a.yaml"],
    ["-h"],
    ["--", "a.yaml"],
    ["--jobs", "-1", "a.yaml"],
    ["--jobs", "x", "a.yaml"],
    ["--jobs", "1", "--jobs", "2", "a.yaml"],
    ["-j1", "a.yaml"],
    ["-j=1", "a.yaml"],
    ["--jobs", "a.yaml"],
    ["--jobs="],
    ["--fail-on", "loud", "a.yaml"],
    ["--format", "xml", "a.yaml"],
    ["--json=yes", "a.yaml"],
    ["--json", "--json", "a.yaml"],
    ["--select", "-x", "a.yaml"],
    ["--cluster"],
    ["--shm-size", "1g", "a.yaml"],
    ["--read-timeout", "1", "a.yaml"],
    ["--no-such-option", "a.yaml"],
    ["--jso", "a.yaml"],
    ["-A", "a.yaml"],
]


def _typer_kwargs(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    got: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> int:
        got.append(kwargs)
        return 0

    monkeypatch.setattr(command, "check", record)
    result = CliRunner().invoke(app, ["check", *args])
    assert result.exit_code == 0, result.output
    return got[0]


@pytest.mark.parametrize("args", TAKEN, ids=" ".join)
def test_fast_arguments_are_typers(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _fast.check_arguments(args)
    assert fast is not None
    want = _typer_kwargs(args, monkeypatch)
    defaults = {k: v for k, v in want.items() if k not in fast}
    assert {**defaults, **fast} == want
    # what the fast path leaves out Typer leaves at the command's own defaults
    assert defaults == {k: DEFAULTS[k] for k in defaults}


@pytest.mark.parametrize("args", LEFT_TO_TYPER, ids=lambda a: " ".join(a) or "(none)")
def test_other_arguments_are_left_to_typer(args: list[str]) -> None:
    assert _fast.check_arguments(args) is None


def test_unreadable_config_is_left_to_typer(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("")
    cfg.chmod(0)
    try:
        readable = _fast.check_arguments(["--config", str(cfg), "a.yaml"]) is not None
        assert readable == os.access(cfg, os.R_OK)  # root reads it anyway
    finally:
        cfg.chmod(0o644)


def test_only_check_is_run_fast() -> None:
    assert _fast.run_fast([]) is False
    assert _fast.run_fast(["rules"]) is False
    assert _fast.run_fast(["check", "--help"]) is False


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    code = "from shmguard.cli import main; main()"
    r = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return r.returncode, r.stdout, r.stderr


def test_fast_and_typer_runs_print_and_exit_alike(tmp_path: Path) -> None:
    """The same file checked through the fast path and through Typer (``--read-timeout``, which
    only Typer parses, at its default value): the same output, errors and exit statuses."""
    bad = tmp_path / "compose.yaml"
    bad.write_text("services:\n  train:\n    image: pytorch/pytorch:2.3.0\n")
    good = tmp_path / "good.yaml"
    good.write_text("services:\n  web:\n    image: nginx:1.27\n")
    for args in (
        [str(bad)],
        [str(good)],
        ["--format", "json", str(bad)],
        ["--select", "SHM999", str(bad)],
        [str(tmp_path / "missing.yaml")],
    ):
        fast = _cli("check", *args, cwd=tmp_path)
        slow = _cli("check", "--read-timeout", "10", *args, cwd=tmp_path)
        assert fast == slow
    assert _cli("check", str(bad), cwd=tmp_path)[0] == 1
    assert _cli("check", str(good), cwd=tmp_path)[0] == 0
    assert _cli("check", "--select", "SHM999", str(bad), cwd=tmp_path)[0] == 2

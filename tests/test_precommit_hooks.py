"""``.pre-commit-hooks.yaml``: parses, uses only pre-commit's documented keys, and names a real
command (the console script and its ``check`` subcommand)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import yaml
from typer.main import get_command

from shmguard.cli import app

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: The keys of a hook definition (https://pre-commit.com/#creating-new-hooks).
KEYS = {
    "id", "name", "entry", "language", "files", "exclude", "types", "types_or",
    "exclude_types", "always_run", "fail_fast", "verbose", "pass_filenames",
    "require_serial", "description", "language_version", "minimum_pre_commit_version",
    "args", "stages",
}  # fmt: skip


def test_hook_parses_and_names_the_check_command() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list) and [h["id"] for h in hooks] == ["shmguard-check"]
    (hook,) = hooks
    assert set(hook) <= KEYS
    assert {"id", "name", "entry", "language"} <= set(hook)
    assert hook["language"] == "python"
    # identify tags of the files check reads
    tags = ["yaml", "json", "shell", "markdown", "rst", "dockerfile", "makefile"]
    assert hook["types_or"] == tags
    script, sub, *options = shlex.split(hook["entry"])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[script] == "shmguard.cli:main"
    group = get_command(app)
    assert sub in group.commands  # type: ignore[attr-defined]
    # pre-commit runs the hook on parts of the file list in parallel already: one process each
    # and the exclusions hold for the staged files it names (ruff's hook does the same)
    assert options == ["--jobs", "1", "--force-exclude"]
    check = group.commands[sub]  # type: ignore[attr-defined]
    assert any("--jobs" in p.opts for p in check.params)
    assert any("--force-exclude" in p.opts for p in check.params)

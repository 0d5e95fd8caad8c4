"""``shmguard CMD ...`` builds only CMD (shmguard.cli._only): its help, parsing and errors are
those of the whole application's CMD."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.main import get_command_name
from typer.testing import CliRunner

from shmguard.cli import _only, app

NAMES = sorted(
    c.name or get_command_name(c.callback.__name__)
    for c in app.registered_commands
    if c.callback is not None
)


def test_every_command_is_found_and_nothing_else() -> None:
    assert len(NAMES) == len(app.registered_commands) >= 17
    for name in NAMES:
        one = _only(name)
        assert one is not None and len(one.registered_commands) == 1
    assert _only("--version") is None and _only("no-such-command") is None
    assert len(app.registered_commands) == len(NAMES)  # the application is left whole


@pytest.mark.parametrize("name", NAMES)
def test_help_and_usage_errors_are_the_whole_applications(name: str) -> None:
    one = _only(name)
    assert one is not None
    for args in ([name, "--help"], [name, "--no-such-option"]):
        got = CliRunner().invoke(one, args)
        want = CliRunner().invoke(app, args)
        assert (got.exit_code, got.stdout, got.stderr) == (
            want.exit_code,
            want.stdout,
            want.stderr,
        )
    assert CliRunner().invoke(one, [name, "--help"]).exit_code == 0


def test_console_entry_point_runs_the_command_and_the_root_options() -> None:
    run = [sys.executable, "-c", "import sys; from shmguard.cli import main; main()"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0 and version.stdout.startswith("shmguard ")
    rules = subprocess.run([*run, "rules"], capture_output=True, text=True, check=False)
    assert rules.returncode == 0 and "SHM001" in rules.stdout
    bad = subprocess.run([*run, "chek"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "No such command" in bad.stderr

"""CLI plumbing shared by every command: NO_COLOR, size options, help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from cli_run import shmguard_out
from shmguard import __version__
from shmguard.cli import _common
from shmguard.units import MiB


def test_no_color_disables_all_styling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    con = _common.console()
    assert con.color_system is None
    assert _common.use_color() is False


def test_empty_no_color_is_not_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    # https://no-color.org: "when present and not an empty string".
    monkeypatch.setenv("NO_COLOR", "")
    assert _common.no_color_requested() is False


def test_size_option_parses_or_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _common.size_option("64Mi", "--shm-size") == 64 * MiB
    assert _common.size_option(None, "--shm-size") is None
    with pytest.raises(typer.Exit) as exc:
        _common.size_option("64 MB MB", "--shm-size")
    assert exc.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("shmguard: error: --shm-size: invalid size '64 MB MB'")
    assert err.count("\n") == 1


def test_help_lists_every_command() -> None:
    out = shmguard_out("--help")
    for command in ("doctor", "explain", "sandbox", "measure", "probe", "demo", "run", "tune"):
        assert command in out


def test_version() -> None:
    out = shmguard_out("--version")
    assert out == f"shmguard {__version__}\n"


@pytest.mark.parametrize("args", [["rules"], ["doctor", "--json"], ["--version"]])
def test_unwritable_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    # a full disk (/dev/full: ENOSPC) and a closed descriptor (>&-): one line, no traceback
    cmd = [sys.executable, "-m", "shmguard", *args]
    with open("/dev/full", "w") as full:
        r = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, check=False)
    assert (r.returncode, r.stderr) == (
        2,
        b"shmguard: error: cannot write standard output: No space left on device\n",
    )
    if args != ["--version"]:  # Click's echo writes nothing to a closed stdout
        closed = ["sh", "-c", 'exec "$@" >&-', "sh", *cmd]
        r = subprocess.run(closed, stderr=subprocess.PIPE, check=False)
        assert (r.returncode, r.stderr) == (
            2,
            b"shmguard: error: cannot write standard output: it is closed\n",
        )
        # a closed pipe (| head) stays Click's: exit 1 without a word
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        assert (p.stderr.read(), p.wait()) == (b"", 1)


def test_unwritable_stderr_leaves_the_output_and_exit_status(tmp_path: Path) -> None:
    # 2>/dev/full: the error lines are lost, the output and the exit status are not
    cmd = [sys.executable, "-m", "shmguard", "check", str(tmp_path / "missing.yaml")]
    quiet = subprocess.run(cmd, capture_output=True, check=False)
    with open("/dev/full", "w") as full:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=full, check=False)
    assert quiet.returncode == r.returncode == 2
    assert b"cannot read" in quiet.stderr
    assert r.stdout == quiet.stdout and b"in 0 files; 1 file with errors" in r.stdout

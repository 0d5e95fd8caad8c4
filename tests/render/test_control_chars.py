"""Text output keeps a hostile value on its own line (issue 24 item 7): a newline in a
manifest's ``metadata.name`` or in a file name is printed as ``\\n``, so a file cannot start a
``::error`` line of its own in a GitHub Actions log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from shmguard.render.escape import printable

POD = (
    'apiVersion: v1\nkind: Pod\nmetadata: {name: "x\\n::error file=a.py::pwned\\r\\u2028y"}\n'
    "spec:\n  containers:\n    - {name: t, image: pytorch/pytorch, command: [torchrun, t.py]}\n"
)


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return _run("check", *args)


def test_printable_escapes_every_control_character() -> None:
    assert printable("a\nb\rc\td\x1b[31me\x85f\u2028g\x7f") == (
        "a\\nb\\rc\\td\\x1b[31me\\x85f\\u2028g\\x7f"
    )
    assert printable("plain 64 MiB /dev/shm") == "plain 64 MiB /dev/shm"


def test_a_name_with_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(POD)
    done = _check(str(f))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert not any(line.startswith("::") for line in lines)
    assert "Pod x\\n::error file=a.py::pwned\\r\\u2028y" in done.stdout
    assert len(lines) == 3  # the finding, its fix, the summary


def test_a_file_name_with_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    d = tmp_path / "repo"
    d.mkdir()
    (d / "x\n::error file=b::pwned.sh").write_text("docker run pytorch/pytorch torchrun t.py\n")
    done = _check(str(d))
    assert done.returncode == 1, done.stderr
    assert not any(line.startswith("::") for line in done.stdout.splitlines())
    assert "x\\n::error file=b::pwned.sh:1:1: SHM001" in done.stdout


#: A value that would start a GitHub Actions command line of its own if printed raw.
HOSTILE = "x\n::error file=c.py::pwned"


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _no_forged_line(*texts: str) -> None:
    for text in texts:
        # str.splitlines also breaks at \r, \x85 and U+2028, as some log viewers do
        assert not any(line.startswith("::") for line in text.splitlines()), text
        assert "\x1b" not in text and "\x85" not in text


def test_explain_escapes_file_names_and_log_lines(tmp_path: Path) -> None:
    log = tmp_path / HOSTILE
    log.write_bytes(
        b"RuntimeError: unable to allocate shared memory(shm) for file </torch_5_1_0"
        b"\xc2\x85::error file=a.py::pwned>: No space left on device (28)\n"
    )
    done = _run("explain", str(log))
    assert done.returncode == 1, done.stderr
    _no_forged_line(done.stdout, done.stderr)
    assert f"shmguard explain: {tmp_path}/x\\n::error file=c.py::pwned (1 line" in done.stdout
    assert "</torch_5_1_0\\x85::error file=a.py::pwned>: No space left" in done.stdout


def test_error_lines_escape_what_they_quote(tmp_path: Path) -> None:
    missing = str(tmp_path / HOSTILE)
    done = _run("explain", missing)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"shmguard: error: {tmp_path}/x\\n::error file=c.py::pwned: no such file"
    ]
    done = _run("run", "--", missing)
    assert done.returncode == 127
    assert (
        done.stderr
        == f"shmguard: error: command not found: {tmp_path}/x\\n::error file=c.py::pwned\n"
    )


def test_doctor_escapes_its_configuration_path(tmp_path: Path) -> None:
    where = tmp_path / HOSTILE
    where.mkdir()
    (where / ".shmguard.toml").write_text("fail-on = 'never'\n")
    done = _run("doctor", cwd=where)
    assert done.returncode == 0, done.stderr
    _no_forged_line(done.stdout)
    assert f"configuration: {tmp_path}/x\\n::error file=c.py::pwned/.shmguard.toml" in done.stdout


def test_run_escapes_the_command_it_names() -> None:
    done = _run("run", "--watch", "--", "sh", "-c", "exit 3", HOSTILE)
    assert done.returncode == 3
    _no_forged_line(done.stderr)
    assert "shmguard run: sh -c 'exit 3' 'x\\n::error file=c.py::pwned' exited with status 3" in (
        done.stderr
    )
    done = _run("run", "--brief", "--require", "100000g", "--", "sh", "-c", "true", HOSTILE)
    assert done.returncode == 1
    _no_forged_line(done.stderr)
    assert "not starting sh -c true 'x\\n::error file=c.py::pwned'" in done.stderr

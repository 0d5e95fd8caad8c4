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
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


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

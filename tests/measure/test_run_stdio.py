"""`shmguard run` started with a standard stream closed (`>&-`, `2>&-`, `<&-`, as cron jobs and
daemons run things): the command still runs, sees the same stream closed, and its status is
shmguard's. It used to die with AttributeError on ``sys.stdout.flush()`` (Python sets
``sys.stdout`` to None for a closed fd 1) and never start the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RUN = [sys.executable, "-m", "shmguard", "run", "--brief"]
#: Writes which of fds 0-2 are open (per /proc/self/fd) to the file named by $1, then exits 7.
PROBE = (
    'for fd in 0 1 2; do [ -e /proc/self/fd/$fd ] && printf "$fd open " >> "$1" '
    '|| printf "$fd closed " >> "$1"; done; exit 7'
)


def run_closed(redirect: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``shmguard run ARGS`` with ``redirect`` (``>&-``...) applied by a shell first."""
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", *RUN, *args],
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("watch", [False, True])
@pytest.mark.parametrize(
    ("redirect", "expected"),
    [
        (">&-", "0 open 1 closed 2 open "),
        ("2>&-", "0 open 1 open 2 closed "),
        ("<&-", "0 closed 1 open 2 open "),
        (">&- 2>&-", "0 open 1 closed 2 closed "),
    ],
)
def test_a_closed_stream_stays_closed_for_the_command(
    tmp_path: Path, watch: bool, redirect: str, expected: str
) -> None:
    seen = tmp_path / "fds"
    w = ["--watch"] if watch else []
    r = run_closed(redirect, *w, "--", "sh", "-c", PROBE, "sh", str(seen))
    assert b"Traceback" not in r.stderr, r.stderr
    assert r.returncode == 7, r.stderr
    # /proc/self/fd is looked up by the `[` builtin of the shell itself: the command's own fds
    assert seen.read_text() == expected


def test_a_closed_stdout_with_watch_still_relays_stderr() -> None:
    r = run_closed(">&-", "--watch", "--", "sh", "-c", "echo to-stderr >&2; echo x; exit 3")
    assert r.returncode == 3, r.stderr
    lines = r.stderr.decode().splitlines()
    assert lines[1] == "to-stderr"
    # then the shell's own complaint about its closed stdout, then shmguard's report
    report = "shmguard run: sh -c 'echo to-stderr >&2; echo x; exit 3' exited with status 3"
    assert report in lines[2:4], lines
    assert b"Traceback" not in r.stderr

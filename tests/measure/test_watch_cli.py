"""`shmguard watch` against a real private tmpfs (the sandbox) that a real process fills:
figures, owners, the threshold's exit status, --on-alert, --once --json against its schema,
bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schema_registry import validator
from shmguard.measure.sampler import shm_usage
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(90)]

WATCH = [sys.executable, "-m", "shmguard", "watch"]
# Holds a named 40 MiB psm_ file and an unlinked 8 MiB torch_ block (open fd) in a 64 MiB
# /dev/shm, then sleeps.
FILL = """
import os, time
with open("/dev/shm/psm_abcdef", "wb") as fh:
    fh.write(b"x" * (40 << 20))
fd = os.open("/dev/shm/torch_7_1_0", os.O_RDWR | os.O_CREAT, 0o600)
os.posix_fallocate(fd, 0, 8 << 20)
os.unlink("/dev/shm/torch_7_1_0")
print("full", flush=True)
time.sleep(60)
"""


def _filled(box: Sandbox) -> int:
    """Start the filler and return a host pid of its tree once 48 MiB are used."""
    box.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if shm_usage(box.shm_path)[0] >= 48 * MiB:  # statvfs: df would read the host's mount
            break
        time.sleep(0.1)
    pids = box.tree_pids()
    assert pids
    return pids[-1]


def test_once_json_reports_size_use_owners_and_alert(root_only: None, no_leftovers: None) -> None:
    spec = SandboxSpec((sys.executable, "-c", FILL), 64 * MiB)
    with Sandbox(spec, output="capture") as box:
        pid = _filled(box)
        r = subprocess.run(
            [*WATCH, "--pid", str(pid), "--once", "--json", "--interval", "200ms"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        below = subprocess.run(
            [*WATCH, "--pid", str(pid), "--once", "--threshold", "90%", "--interval", "0.2"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        box.kill("test over")
        box.wait(timeout=30)
    assert r.returncode == 0, r.stderr  # 48 MiB of 64 MiB is 75%: below the default 80%
    data = json.loads(r.stdout)
    validator("watch").validate(data)
    assert data["schema"] == "shmguard.watch/1"
    assert data["total"] == 64 * MiB
    assert data["used"] == 48 * MiB
    assert data["free"] == 16 * MiB
    assert data["alert"] is False and data["threshold"] == 0.8
    assert data["used_fraction"] == 0.75
    assert data["owners"]["psm"] == 40 * MiB
    assert data["owners"]["torch"] == 8 * MiB
    assert data["processes"] >= 1
    assert data["stall"]["stalled"] is False
    assert data["failed_allocations"] == []
    assert below.returncode == 0, below.stderr
    text = below.stdout.decode()
    assert "size 64 MiB, used 48 MiB (75%), free 16 MiB" in text
    assert "psm 40 MiB" in text and "torch 8 MiB" in text


# A glibc POSIX named semaphore (sem_open(3): /dev/shm/sem.<name>, mapped), held open.
SEM = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.sem_open.restype = ctypes.c_void_p
assert libc.sem_open(b"/shmguard_watch", os.O_CREAT, 0o600, 1), ctypes.get_errno()
print("held", flush=True)
time.sleep(60)
"""


def test_semaphores_have_their_own_owner_column(root_only: None, no_leftovers: None) -> None:
    # watch counted them as "other" where measure, doctor and the exporter say semaphore.
    spec = SandboxSpec((sys.executable, "-c", SEM), 16 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start()
        deadline = time.monotonic() + 30
        while shm_usage(box.shm_path)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = box.tree_pids()[-1]
        runs = [
            subprocess.run(
                [*WATCH, "--pid", str(pid), "--once", *extra, "--interval", "0.1"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            for extra in ([], ["--json"])
        ]
        box.kill("test over")
        box.wait(timeout=30)
    text, js = runs
    assert text.returncode == 0, text.stderr
    owners_line = next(ln for ln in text.stdout.splitlines() if ln.startswith("owners: "))
    assert "semaphore 4 KiB, other 0 B" in owners_line, owners_line
    data = json.loads(js.stdout)
    validator("watch").validate(data)
    assert (data["owners"]["semaphore"], data["owners"]["other"]) == (4096, 0)


#: --on-alert keeps the watch going past the threshold, up to the stall.
ALERT_OK = ("--on-alert", "true")
# Fills its /dev/shm to the last page, then idles: full, and no progress.
FULL = """
import time
with open("/dev/shm/psm_full", "wb") as fh:
    try:
        while True:
            fh.write(b"x" * (1 << 20))
            fh.flush()
    except OSError:
        pass
print("full", flush=True)
time.sleep(60)
"""


def test_a_stall_report_says_the_output_is_not_visible(root_only: None, no_leftovers: None) -> None:
    # watch --pid said "no output" of a job whose output it cannot see.
    spec = SandboxSpec((sys.executable, "-c", FULL), 16 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            used, total = shm_usage(box.shm_path)
            if total and total - used < 4096:
                break
            time.sleep(0.05)
        pid = box.tree_pids()[-1]
        r = subprocess.run(
            [*WATCH, "--pid", str(pid), "--stall-after", "1s", "--interval", "0.2", *ALERT_OK],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        box.kill("test over")
        box.wait(timeout=30)
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "stalled: DataLoader blocked on /dev/shm" in lines
    (progress,) = [ln for ln in lines if "no progress for" in ln]
    assert progress.endswith(" s (no shm change, no CPU; the job's output is not visible here)")


def test_threshold_exit_and_on_alert(root_only: None, no_leftovers: None, tmp_path: Path) -> None:
    spec = SandboxSpec((sys.executable, "-c", FILL), 64 * MiB)
    marker = tmp_path / "alert.env"
    with Sandbox(spec, output="capture") as box:
        pid = _filled(box)
        crossed = subprocess.run(
            [*WATCH, "--pid", str(pid), "--threshold", "70%", "--interval", "0.2"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        # With --on-alert the command runs once per crossing and watching goes on: stopped
        # here by SIGTERM (exit 0, as Ctrl-C) after a few refreshes.
        cmd = f'echo "$SHMGUARD_ALERT $SHMGUARD_USED $SHMGUARD_SIZE" >> {marker}'
        proc = subprocess.Popen(
            [
                *WATCH,
                "--pid",
                str(pid),
                "--threshold",
                "70%",
                "--interval",
                "0.2",
                "--on-alert",
                cmd,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a few more refreshes above the threshold: no second alert
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        box.kill("test over")
        box.wait(timeout=30)
    assert crossed.returncode == 1, crossed.stderr
    assert "ALERT: /dev/shm reached 48 MiB, at least 70% of 64 MiB" in crossed.stdout.decode()
    assert proc.returncode == 0, err
    assert marker.read_text().splitlines() == [f"threshold {48 * MiB} {64 * MiB}"]


def test_container_root_and_bad_input(tmp_path: Path) -> None:
    (tmp_path / "dev" / "shm").mkdir(parents=True)
    r = subprocess.run(
        [*WATCH, "--container-root", str(tmp_path), "--once", "--json", "--interval", "0.1"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)
    validator("watch").validate(data)
    assert data["path"] == f"{tmp_path}/dev/shm"
    assert data["cgroup"]["reason"] == "no process given (--container-root)"
    for args, message in (
        (["--pid", "1", "--container-root", "/"], "--pid and --container-root: give one"),
        (["--threshold", "0%"], "--threshold: must be above 0%"),
        (["--threshold", "lots"], "--threshold: not a percentage"),
        (["--interval", "-1s"], "--interval: invalid duration"),
        (["--container-root", str(tmp_path / "nope")], "/nope/dev/shm: no such directory"),
    ):
        bad = subprocess.run([*WATCH, *args, "--once"], capture_output=True, timeout=30)
        assert bad.returncode == 2, args
        err = bad.stderr.decode()
        assert err.startswith("shmguard: error: ") and message in err, err
        assert len(err.splitlines()) == 1

"""probe's --trial-time (jobs that never end), --memory/--cpus, and bad input to them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from schema_registry import validator
from shmguard.measure.outcome import Outcome
from shmguard.measure.run import measure_command
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

#: A job that never ends: 8 MiB in /dev/shm, then sleeps for ever.
FOREVER_8M = "head -c 8388608 /dev/zero > /dev/shm/x && exec sleep infinity"


def shmguard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=110,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trial-time", "2x"], "--trial-time: invalid duration '2x': unknown unit 'x'"),
        (["--trial-time", "0"], "--trial-time: invalid duration '0': must be greater than 0"),
        (["--trial-time", "-5s"], "--trial-time: invalid duration '-5s': must not be negative"),
        (["--trial-time", "1m30"], "--trial-time: invalid duration '1m30': no unit after '30'"),
        (["--trial-time", "soon"], "--trial-time: invalid duration 'soon'; write e.g. 30s"),
        (["--memory", "lots"], "--memory: invalid size 'lots'"),
        (["--memory", "0"], "--memory: invalid size '0': must be greater than 0"),
        (["--memory", "1m"], "--memory: "),  # below Docker's 6 MiB minimum
        (["--cpus", "0"], "--cpus: must be greater than 0, got 0"),
        (["--cpus", "100000"], "--cpus: "),  # more than this machine has
    ],
)
def test_bad_trial_time_memory_and_cpus(args: list[str], message: str, tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    done = shmguard("probe", *args, "--", "touch", str(marker))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"shmguard: error: {message}"), done.stderr
    assert done.stderr.count("\n") == 1  # one line, no traceback
    assert not marker.exists()


def test_trial_time_probes_a_job_that_never_ends(root_only: None, no_leftovers: None) -> None:
    done = shmguard(
        "probe", "--json", "--trial-time", "1s", "--hang-after", "1", "--", "sh", "-c", FOREVER_8M
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["trial_time"] == 1.0
    assert data["measure"]["stopped_by"] == "trial-time"
    assert data["measure"]["cause"]["outcome"] == "ok"
    # 8 MiB exactly fills an 8 MiB tmpfs: no free page and no progress is a hang (the stall
    # verdict), so the first size that passes is one MiB above.
    assert data["minimum"] == 9 * MiB
    assert data["verified"] is True
    passed = [t for t in data["trials"] if t["passed"]]
    assert passed and all(t["survived"] for t in passed)
    assert not any(t["survived"] for t in data["trials"] if not t["passed"])
    assert data["survived"] == len(passed) + 1  # and the measuring run
    assert all(t["wall_time"] < 30 for t in data["trials"])  # stopped, not timed out
    assert data["model"] is None
    assert data["start_basis"] == "from the measured peak 8 MiB (no DataLoader seen)"


def test_trial_time_in_the_text_report(root_only: None, no_leftovers: None) -> None:
    done = shmguard(
        "probe", "--trial-time", "1s", "--no-verify", "--ceiling", "12m", "--floor", "8m",
        "--", "sh", "-c", FOREVER_8M.replace("8388608", "4194304"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "(still going at the trial time: stopped)" in out
    assert "pass (survived)" in out
    passes = out.count("pass (survived)")
    assert (
        f"Trial time 1 s: {passes + 1} of {passes + 1} passing runs were still going then with "
        "/dev/shm steady and were stopped (SIGTERM, then SIGKILL after 5 s); they count as "
        "passes (survived)"
    ) in " ".join(out.split())


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(
    root_only: None, no_leftovers: None
) -> None:
    r = measure_command(
        ["sh", "-c", "trap '' TERM; " + FOREVER_8M],
        shm_size=16 * MiB,
        run_for=0.5,
        stop_grace=0.5,
        timeout=30,
        output="capture",
    )
    assert r.survived and r.passed
    assert r.stopped_by == "trial-time"
    assert r.signal == "SIGKILL"
    assert r.peak == 8 * MiB
    assert r.wall_time < 10


def test_a_never_ending_job_that_failed_to_allocate_does_not_pass(
    root_only: None, no_leftovers: None
) -> None:
    # tmpfs refuses the fallocate up front: nothing fills, the job sleeps on; its output still
    # reports the failed allocation, so surviving the trial time is no pass.
    r = measure_command(
        ["sh", "-c", "fallocate -l 40M /dev/shm/x; exec sleep infinity"],
        shm_size=8 * MiB,
        run_for=0.5,
        timeout=30,
        output="capture",
        strict=True,
    )
    assert r.stopped_by == "trial-time"
    assert not r.survived
    assert r.cause.outcome is Outcome.SHM_EXHAUSTED
    assert "still running at the end of its trial time, but its output" in r.cause.summary


#: Exits 3 unless its own memory and CPU cgroups carry the limits probe was given (cgroup v1,
#: as tests/measure/test_sandbox.py reads them), then needs 4 MiB of /dev/shm.
LIMITED_4M = (
    "cg=$(grep -E '^[0-9]+:memory:' /proc/self/cgroup | cut -d: -f3); "
    'mem=$(cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes"); '
    "cg=$(grep -E '^[0-9]+:cpu(,|:)' /proc/self/cgroup | cut -d: -f3); "
    'cpu=$(cat "/sys/fs/cgroup/cpu$cg/cpu.cfs_quota_us"); '
    '[ "$mem" = 67108864 ] && [ "$cpu" = 50000 ] || { echo "limits $mem $cpu" >&2; exit 3; }; '
    "head -c 4194304 /dev/zero > /dev/shm/x"
)


def test_memory_and_cpus_reach_every_run(root_only: None, no_leftovers: None) -> None:
    done = shmguard(
        "probe", "--json", "--memory", "64m", "--cpus", "0.5", "--", "sh", "-c", LIMITED_4M
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["measure"]["memory_limit"] == 64 * MiB
    assert data["measure"]["cpus"] == 0.5
    assert data["minimum"] == 4 * MiB
    # Every trial ran under both limits: a missing one would have exited 3 ("failed").
    assert {t["outcome"] for t in data["trials"]} <= {"ok", "shm-exhausted"}
    assert data["verified"] is True

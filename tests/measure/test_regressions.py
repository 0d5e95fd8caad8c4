"""Regressions found by adversarial use of sandbox / measure / probe (each test names its input).

Every one ran against the real sandbox on this machine first and failed before its fix.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from measure_helpers import processes_with

from schema_registry import validator
from shmguard.estimate import recommend
from shmguard.measure.cgroups import (
    available_cpus,
    check_limits,
    plan_cgroups,
    shm_beyond_memory,
)
from shmguard.measure.outcome import Outcome, classify
from shmguard.measure.sampler import shm_usage
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.units import GiB, MiB

pytestmark = [pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]


def shmguard(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args], capture_output=True, text=True, timeout=timeout
    )


# ------------------------------------------------------------------- option values (exit 2)

N = available_cpus()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # `--cpus inf` was an OverflowError traceback, `--cpus nan` a ValueError text
        (
            ["sandbox", "--shm-size", "8m", "--cpus", "inf"],
            "--cpus: must be a finite number, got inf",
        ),
        (
            ["sandbox", "--shm-size", "8m", "--cpus", "nan"],
            "--cpus: must be a finite number, got nan",
        ),
        (["measure", "--cpus", "inf"], "--cpus: must be a finite number, got inf"),
        # `--cpus 1000` wrote a 100 s quota per 100 ms on a 2-CPU host; 0.001 became 0.01
        (
            ["sandbox", "--shm-size", "8m", "--cpus", "1000"],
            f"--cpus: must be from 0.01 to {N}.00, as there are only {N} CPUs available, got 1000",
        ),
        (
            ["sandbox", "--shm-size", "8m", "--cpus", "0.001"],
            "--cpus: must be at least 0.01 (Docker's minimum), got 0.001",
        ),
        # `--memory 1` started the command in a 1-byte cgroup: a silent exit 137
        (
            ["sandbox", "--shm-size", "8m", "--memory", "1"],
            "--memory: must be at least 6 MiB (Docker's minimum), got 1 bytes",
        ),
        # NaN timeouts were accepted and disabled the stop
        (
            ["sandbox", "--shm-size", "8m", "--stop-timeout", "nan"],
            "--stop-timeout: must be a finite number, got nan",
        ),
        (["measure", "--timeout", "nan"], "--timeout: must be a finite number, got nan"),
        (["measure", "--hang-after", "inf"], "--hang-after: must be a finite number, got inf"),
        (["probe", "--trial-timeout", "nan"], "--trial-timeout: must be a finite number, got nan"),
        # `--interval 1e-9` made the SCHED_FIFO sampler spin a core
        (["measure", "--interval", "1e-9"], "--interval: must be from 0.1 to 1000 ms, got 1e-09"),
        (["measure", "--interval", "nan"], "--interval: must be a finite number, got nan"),
        # `probe --headroom inf` was an OverflowError traceback after the whole search
        (["measure", "--headroom", "inf"], "--headroom: must be a finite percentage, got 'inf'"),
        (["probe", "--headroom", "nan%"], "--headroom: must be a finite percentage, got 'nan%'"),
    ],
)
def test_bad_option_values_are_one_line_errors(args: list[str], message: str) -> None:
    done = shmguard(*args, "--", "true")
    assert done.returncode == 2
    assert done.stderr == f"shmguard: error: {message}\n"
    assert done.stdout == ""


def test_library_limits_refuse_what_docker_refuses() -> None:
    assert check_limits(6 * MiB, 0.01, 2) is None
    assert check_limits(6 * MiB - 1, None) == (
        "memory limit must be at least 6 MiB (Docker's minimum), got 6291455 bytes"
    )
    assert check_limits(None, 3.0, 2) == (
        "cpus must be from 0.01 to 2.00, as there are only 2 CPUs available, got 3"
    )
    assert check_limits(None, 3.0) is None  # no host bound asked for (fixture trees)
    with pytest.raises(ValueError, match=r"at least 0\.01"):
        plan_cgroups(None, float("inf"))


@pytest.mark.root
def test_memory_not_above_shm_size_warns(root_only: None, no_leftovers: None) -> None:
    done = shmguard("sandbox", "--shm-size", "64m", "--memory", "16m", "--", "true")
    assert done.returncode == 0
    assert done.stderr == (
        "shmguard: warning: --memory 16 MiB is not above --shm-size 64 MiB: tmpfs pages count "
        "against the memory limit, so the job is OOM-killed before /dev/shm can fill\n"
    )


@pytest.mark.root
@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["sandbox", "--shm-size", "1p"], "--shm-size"),
        (["measure", "--json", "--shm-size", "1p"], "--shm-size"),
        (["probe", "--json", "--no-verify", "--ceiling", "1p"], "--ceiling"),
    ],
)
def test_shm_size_above_the_machines_memory_warns(
    root_only: None, no_leftovers: None, args: list[str], flag: str
) -> None:
    # `sandbox --shm-size 1TB` on a 24 GiB machine was accepted without a word.
    done = shmguard(*args, "--", "true")
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"shmguard: warning: {flag} 1 PiB is more than this machine's ")
    assert first.endswith(
        "tmpfs pages come out of memory, so the command would run out of memory before "
        "/dev/shm filled up; running it anyway (a tmpfs size reserves nothing)"
    )
    quiet = shmguard(*args[:-1], "64m", "--", "true")
    assert "warning" not in quiet.stderr


def test_shm_beyond_memory_counts_swap() -> None:
    assert shm_beyond_memory(2 * GiB, GiB) == (
        "is more than this machine's 1 GiB of RAM: tmpfs pages come out of memory, so the "
        "command would run out of memory before /dev/shm filled up"
    )
    assert "1 GiB of RAM and 512 MiB of swap" in (shm_beyond_memory(2 * GiB, GiB, GiB // 2) or "")
    assert shm_beyond_memory(2 * GiB, GiB, GiB) is None  # swap can hold tmpfs pages
    assert shm_beyond_memory(GiB, GiB) is None
    assert shm_beyond_memory(2 * GiB, None) is None  # unknown RAM: nothing to say


# ---------------------------------------------------------------- outcome and recommendation


def test_exit_0_with_full_shm_and_an_enospc_message_is_not_a_pass() -> None:
    # `sh -c 'head -c 20000000 /dev/zero > /dev/shm/x; sleep 1'` exits 0 although the write
    # failed: probe counted 12 MiB as a pass for a command that needs 19.07 MiB.
    text = "head: error writing 'standard output': No space left on device\n"
    cause = classify(0, None, None, text, shm_full=True)
    assert cause.outcome is Outcome.SHM_EXHAUSTED
    assert cause.evidence == ("head: error writing 'standard output': No space left on device",)
    assert classify(0, None, None, text, shm_full=False).outcome is Outcome.OK
    assert classify(0, None, None, "all good\n", shm_full=True).outcome is Outcome.OK


def test_hang_without_feeder_evidence_does_not_blame_a_dataloader() -> None:
    # `cat /dev/zero > /dev/shm/x; sleep infinity` was reported as a DataLoader feeder failure.
    cause = classify(137, "SIGKILL", "hang", "cat: write error: No space left on device\n")
    assert cause.outcome is Outcome.HANG
    assert cause.summary == "the job hung: /dev/shm was full and nothing progressed"
    # The feeder's evidence is its traceback as the catalogue reads it (the `_feed` frame then
    # the failed allocation), the same text `explain` calls dataloader-feeder-failure.
    traceback = (
        '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 244, in _feed\n'
        "    obj = _ForkingPickler.dumps(obj)\n"
        "RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_0>: "
        "No space left on device (28)\n"
    )
    feeder = classify(137, "SIGKILL", "hang", traceback)
    assert "feeder thread" in feeder.summary
    assert feeder.signature == "dataloader-feeder-failure"
    # A `_feed` frame alone (any exception in the feeder, e.g. an unpicklable object) is not.
    frame = classify(137, "SIGKILL", "hang", '  File "queues.py", line 244, in _feed\n')
    assert "feeder thread" not in frame.summary


def test_zero_peak_recommendation_says_why() -> None:
    # `shmguard measure -- true` printed "Recommendation none: measured peak".
    rec = recommend(0, "measured peak")
    assert rec.shm_size is None
    assert rec.shm_basis == (
        "measured peak 0 B: the command used no /dev/shm, so any size works (the runtimes' "
        "default 64 MiB included)"
    )
    with pytest.raises(ValueError, match="finite"):
        recommend(MiB, "measured peak", headroom=float("inf"))


# --------------------------------------------------------------------------- real sandboxes


@pytest.mark.root
def test_held_command_does_not_run_before_release(root_only: None, no_leftovers: None) -> None:
    # measure started its sampler after the command: `fallocate -l 40M /dev/shm/x; rm ...`
    # was sometimes measured as a 0 B peak. A held sandbox runs nothing until released.
    spec = SandboxSpec(("sh", "-c", "head -c 4194304 /dev/zero > /dev/shm/x; echo ran"), 8 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start(hold=True)
        time.sleep(0.3)
        assert shm_usage(box.shm_path)[0] == 0
        box.release()
        result = box.wait(timeout=30)
    assert result.exit_status == 0
    assert result.stdout_tail == b"ran\n"


@pytest.mark.root
def test_measure_sees_an_allocation_freed_at_once(root_only: None, no_leftovers: None) -> None:
    done = shmguard(
        "measure", "--json", "--", "sh", "-c", "fallocate -l 40M /dev/shm/x; rm /dev/shm/x"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("measure").validate(data)
    assert data["peak"] == 40 * MiB
    assert data["recommendation"]["shm_size"] == 56 * MiB


@pytest.mark.root
def test_measure_zero_peak_report(root_only: None, no_leftovers: None) -> None:
    done = shmguard("measure", "--json", "--", "true")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("measure").validate(data)
    assert data["peak"] == 0
    assert data["recommendation"]["shm_size"] is None
    assert "the command used no /dev/shm" in data["recommendation"]["shm_basis"]


@pytest.mark.root
def test_closed_stdout_ends_the_command_like_a_pipe(root_only: None, no_leftovers: None) -> None:
    # `shmguard measure -- yes | head -1` ran forever: the relay swallowed EPIPE and kept
    # draining the command's pipe, so `yes` never got SIGPIPE.
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", "measure", "--", "yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"y\n"
    proc.stdout.close()
    try:
        err = proc.stderr.read()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1  # the command died of SIGPIPE, as `yes | head -1` does
    assert b"Traceback" not in err
    assert processes_with("shmguard measure -- yes") == []


@pytest.mark.root
def test_probe_counts_an_exit_0_enospc_run_as_a_failure(
    root_only: None, no_leftovers: None
) -> None:
    # 20,000,000 bytes = 4883 pages: 19 MiB (4864 pages) fails, 20 MiB fits.
    script = "head -c 20000000 /dev/zero > /dev/shm/x; sleep 0.1"
    done = shmguard("probe", "--json", "--no-verify", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["minimum"] == 20 * MiB
    rates = {r["size"]: (r["passes"], r["runs"]) for r in data["pass_rates"]}
    assert rates[20 * MiB] == (3, 3)
    assert all(p == 0 for size, (p, _) in rates.items() if size < 20 * MiB)
    failed = [t for t in data["trials"] if not t["passed"]]
    assert failed and all(t["outcome"] == "shm-exhausted" for t in failed)
    assert all(t["exit_status"] == 0 for t in failed)


@pytest.mark.root
@pytest.mark.parametrize("command", ["probe", "demo"])
def test_sigterm_stops_probe_instead_of_counting_a_failure(
    root_only: None, no_leftovers: None, command: str
) -> None:
    # Ctrl-C / SIGTERM during probe used to kill only the trial's command: the trial counted
    # as a failure, the search went on and printed a wrong minimum with exit 0.
    marker = "0.31415"
    if command == "probe":
        args = ["probe", "--ceiling", "8m", "--", "sh", "-c", f"sleep {marker}; sleep 20"]
        ours = f"sleep {marker}"  # also in the sandbox helpers' command lines
    else:
        pytest.importorskip("torch")
        args = ["demo", "--batches", "3"]
        ours = str(ROOT / "src" / "shmguard" / "examples" / "seed_loader.py")
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Signal once the first sandboxed run (measuring run / 64 MiB run) is under way: a fixed
    # delay raced with a slow start (importing torch in a fresh venv) and hit shmguard before
    # it had a sandbox to tear down.
    deadline = time.monotonic() + 60
    # (shmguard's own command line holds the probe's marker: it does not count)
    while (
        not set(processes_with(ours)) - {proc.pid}
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert err.splitlines()[-1] == (
        "shmguard: error: interrupted by SIGTERM; the sandbox was torn down"
    )
    assert set(processes_with(ours)) - {proc.pid} == set()


@pytest.mark.root
def test_oom_kill_is_reported_not_silent(root_only: None, no_leftovers: None) -> None:
    # `sandbox --memory 64m` around a job that allocates 200 MiB ended with a bare 137.
    code = "b = b'x' * (200 << 20)"
    done = shmguard(
        "sandbox", "--shm-size", "8m", "--memory", "64m", "--json", "--", sys.executable, "-c", code
    )
    assert done.returncode == 137
    data = json.loads(done.stdout)
    validator("sandbox").validate(data)
    assert data["oom_kills"] == 1
    assert done.stderr.splitlines()[-1] == (
        "shmguard: the memory cgroup's OOM killer killed 1 process (--memory 64 MiB; tmpfs "
        "pages count against it)"
    )
    clean = json.loads(shmguard("sandbox", "--shm-size", "8m", "--json", "--", "true").stdout)
    assert clean["oom_kills"] == 0


def test_oom_counter_makes_the_cause_certain() -> None:
    cause = classify(1, None, None, "RuntimeError: something\n", oom_kills=2)
    assert cause.outcome is Outcome.OOM_KILLED
    assert cause.summary == (
        "the memory cgroup's OOM killer killed 2 processes (tmpfs pages count against the "
        "memory limit)"
    )
    assert cause.evidence == ("memory cgroup: oom_kill 2",)
    assert classify(0, None, None, "", oom_kills=1).outcome is Outcome.OK


@pytest.mark.root
def test_probe_basis_is_true_when_only_the_ceiling_passed(
    root_only: None, no_leftovers: None
) -> None:
    # A command that passes only with a tmpfs of at least 64 MiB (it uses none): the search
    # climbs back to the ceiling, where only the measuring run passed. The basis used to claim
    # "64 MiB passed 3 times in a row".
    script = "[ $(df -k /dev/shm | tail -1 | awk '{print $2}') -ge 65536 ]"
    done = shmguard("probe", "--json", "--no-verify", "--ceiling", "64m", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["minimum"] == 64 * MiB
    assert data["minimum_basis"] == (
        "only the ceiling 64 MiB passed (the measuring run); 62 MiB failed"
    )
    assert all(not t["passed"] for t in data["trials"])
    assert [t["size"] // MiB for t in data["trials"]] == [1, 2, 3, 5, 8, 12, 18, 27, 41, 62]


@pytest.mark.root
def test_missing_interpreter_is_named(root_only: None, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/nonexistent/interp\necho hi\n")
    script.chmod(0o755)
    done = shmguard("sandbox", "--shm-size", "8m", "--", str(script))
    assert done.returncode == 127
    assert done.stderr == (
        f"shmguard: error: {script}: /nonexistent/interp: bad interpreter: "
        "No such file or directory\n"
    )


@pytest.mark.root
def test_interrupted_measure_reports_and_exits_130(root_only: None, no_leftovers: None) -> None:
    # SIGTERM to `shmguard measure` ended with exit 1, as if the job itself had failed.
    marker = "0.2719"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shmguard",
            "measure",
            "--json",
            "--",
            "sh",
            "-c",
            f"echo ready; sleep {marker}; sleep 30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stderr.readline() == "ready\n"  # with --json the command's stdout is on stderr
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    data = json.loads(out)
    validator("measure").validate(data)
    assert data["signal"] == "SIGTERM"
    assert data["cause"]["outcome"] == "signaled"
    assert data["recommendation"]["shm_size"] is None  # a part of a run sizes nothing
    assert data["recommendation"]["shm_basis"].startswith(
        "the run was interrupted (SIGTERM) before it finished, so its shm need is unknown"
    )
    assert processes_with(f"sleep {marker}") == []


@pytest.mark.root
def test_idle_job_near_its_limit_without_an_error_is_not_a_hang(
    root_only: None, no_leftovers: None
) -> None:
    # `fallocate -l 40M /dev/shm/x; sleep 3` was stopped as a "hang" in every probe trial
    # below 40 MiB + one sampling step, so probe reported 45 MiB for a 40 MiB job.
    from shmguard.measure.run import measure_command

    idle = "head -c 6291456 /dev/zero > /dev/shm/x; sleep 2"
    r = measure_command(
        ["sh", "-c", idle],
        shm_size=8 * MiB,
        full_margin=4 * MiB,
        hang_after=0.5,
        output="capture",
        timeout=60,
    )
    assert r.stopped_by is None
    assert r.cause.outcome is Outcome.OK
    failed = (
        "head -c 6291456 /dev/zero > /dev/shm/x; echo 'x: No space left on device' >&2; sleep 20"
    )
    r = measure_command(
        ["sh", "-c", failed],
        shm_size=8 * MiB,
        full_margin=4 * MiB,
        hang_after=0.5,
        output="capture",
        timeout=60,
    )
    assert r.stopped_by == "hang"
    assert r.cause.outcome is Outcome.HANG
    assert r.alloc_errors == ("x: No space left on device",)


@pytest.mark.root
def test_probe_with_an_allocation_refused_up_front(root_only: None, no_leftovers: None) -> None:
    # tmpfs refuses a fallocate larger than itself before allocating anything, so /dev/shm never
    # looks full; the script exits 0 anyway. Every size below 40 MiB passed (minimum "6 MiB").
    done = shmguard(
        "probe", "--json", "--no-verify", "--", "sh", "-c", "fallocate -l 40M /dev/shm/x; sleep 0.2"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("probe").validate(data)
    assert data["minimum"] == 40 * MiB
    assert all(not t["passed"] for t in data["trials"] if t["size"] < 40 * MiB)
    assert {t["outcome"] for t in data["trials"] if t["size"] < 40 * MiB} == {"shm-exhausted"}
    assert data["recommendation"]["shm_size"] == 56 * MiB


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # `--plot DIR` silently wrote DIR.png next to it; `--plot x.txt` was a ValueError
        # traceback after the whole run.
        ("", "is a directory; give a file name such as shm.png"),
        ("shm.txt", "unknown image format .txt; use .png, .svg or .pdf"),
        ("shm", "unknown image format (no suffix); use .png, .svg or .pdf"),
    ],
)
def test_bad_plot_file_is_refused_before_the_run(tmp_path: Path, name: str, message: str) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / name if name else tmp_path
    marker = tmp_path / "ran"
    done = shmguard("measure", "--plot", str(target), "--", "touch", str(marker))
    assert done.returncode == 2
    assert done.stderr == f"shmguard: error: --plot {target}: {message}\n"
    assert not marker.exists()  # refused before anything ran
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------- temporary files of killed workers


def test_command_gets_a_private_tmpdir_removed_at_the_end(tmp_path: Path) -> None:
    # multiprocessing makes $TMPDIR/pymp-* directories that only a clean worker exit removes;
    # the teardown SIGKILLs workers, so a failing PyTorch trial used to leave two in /tmp.
    seen = tmp_path / "seen"
    spec = SandboxSpec(
        command=(
            sys.executable,
            "-c",
            "import multiprocessing.util as u, os, sys, time; "
            # written whole, then renamed: the test must never read a half-written file
            f"open({str(seen)!r} + '.part', 'w').write(u.get_temp_dir()); "
            f"os.rename({str(seen)!r} + '.part', {str(seen)!r}); time.sleep(60)",
        ),
        shm_size=8 * MiB,
    )
    with Sandbox(spec, output="capture") as box:
        box.start()
        private = box.tmpdir
        assert private is not None and Path(private).name.startswith("shmguard-tmp-")
        deadline = time.monotonic() + 30
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pymp = Path(seen.read_text())
        assert pymp.parent == Path(private) and pymp.is_dir()
        box.kill("test")
        result = box.wait(timeout=30)
    assert result.signal == signal.SIGKILL
    assert not Path(private).exists()
    assert box.tmpdir is None


def test_overlapping_sandboxes_leave_the_signal_mask_as_they_found_it(
    root_only: None, no_leftovers: None
) -> None:
    # Two sandboxes started in the main thread and ended in start order left SIGTERM blocked
    # (the second restored the block the first had set), so an exporter started afterwards by
    # the monitor tests could only be stopped with SIGKILL.
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    spec = SandboxSpec(("sleep", "0.2"), 8 * MiB)
    first, second = Sandbox(spec), Sandbox(spec)
    first.__enter__()
    second.__enter__()
    first.start()
    second.start()
    assert signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    first.__exit__(None, None, None)
    assert signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # second waits
    assert second.wait(timeout=30).exit_status == 0
    second.__exit__(None, None, None)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
    assert signal.SIGTERM not in before

"""The sandbox on this machine: real namespaces, tmpfs, cgroups, signals and teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from measure_helpers import leftover_cgroups, processes_with

from shmguard.measure.sandbox import Sandbox, SandboxError, SandboxSpec, run_sandboxed
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]
SRC = str(Path(__file__).resolve().parents[2] / "src")
SYSTEM_PY = "/usr/bin/python3"


def _sh(script: str, size: int = 16 * MiB, **kw: object) -> SandboxSpec:
    return SandboxSpec(("sh", "-c", script), size, **kw)  # type: ignore[arg-type]


def test_private_tmpfs_of_exact_size(root_only: None, no_leftovers: None) -> None:
    marker = f"shmguard-test-{os.getpid()}"
    script = (
        f"{sys.executable} -c "
        "\"import os; s=os.statvfs('/dev/shm'); print(s.f_blocks*s.f_frsize)\"; "
        f"echo x > /dev/shm/{marker}; grep ' /dev/shm ' /proc/self/mountinfo"
    )
    with Sandbox(_sh(script, 64 * MiB), output="capture") as box:
        box.start()
        result = box.wait()
    out = result.stdout_tail.decode()
    assert out.splitlines()[0] == str(64 * MiB)
    assert "tmpfs" in out and "size=65536k" in out
    assert result.exit_status == 0 and result.exit_code == 0
    assert not Path("/dev/shm", marker).exists()  # the host's /dev/shm never saw it
    assert result.proc_remounted
    assert result.user_namespace is False


def test_exit_status_passes_through(root_only: None) -> None:
    assert run_sandboxed(_sh("exit 7")).exit_status == 7
    assert run_sandboxed(_sh("exit 0")).exit_status == 0


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGBUS, "SIGBUS"), (signal.SIGKILL, "SIGKILL")])
def test_killed_by_signal_is_128_plus_n(root_only: None, sig: int, name: str) -> None:
    result = run_sandboxed(_sh(f"kill -{int(sig)} $$"))
    assert result.exit_status == 128 + sig
    assert result.signal == sig and result.signal_name == name
    assert result.exit_code is None


def test_command_that_does_not_exist(root_only: None, no_leftovers: None) -> None:
    result = run_sandboxed(SandboxSpec(("shmguard-no-such-command",), MiB))
    assert result.exit_status == 127
    assert result.exec_error == "shmguard-no-such-command: No such file or directory"


def test_fork_and_exit_leaves_nothing_running(root_only: None, no_leftovers: None) -> None:
    marker = "301.4159"
    result = run_sandboxed(_sh(f"(sleep {marker} &) ; (sleep {marker} &) ; echo forked"))
    assert result.exit_status == 0
    deadline = time.monotonic() + 5
    while processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(f"sleep {marker}") == []


def test_zero_size_is_refused(root_only: None) -> None:
    with pytest.raises(SandboxError, match="must be > 0"):
        Sandbox(SandboxSpec(("true",), 0))


def test_memory_limit_is_a_real_cgroup_limit(root_only: None, no_leftovers: None) -> None:
    script = (
        "cg=$(grep -E '^[0-9]+:memory:' /proc/self/cgroup | cut -d: -f3); "
        'cat "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes"; '
        "cg=$(grep -E '^[0-9]+:cpu(,|:)' /proc/self/cgroup | cut -d: -f3); "
        'cat "/sys/fs/cgroup/cpu$cg/cpu.cfs_quota_us"'
    )
    with Sandbox(_sh(script, memory_limit=64 * MiB, cpus=0.5), output="capture") as box:
        box.start()
        result = box.wait()
    assert result.stdout_tail.decode().split() == [str(64 * MiB), "50000"]
    assert result.memory_peak.value is not None and result.memory_peak.value > 0


def test_memory_limit_kills_a_job_that_exceeds_it(root_only: None, no_leftovers: None) -> None:
    code = "b = b'x' * (256 << 20); print(len(b))"
    spec = SandboxSpec((sys.executable, "-c", code), 16 * MiB, memory_limit=64 * MiB)
    result = run_sandboxed(spec, output="capture")
    assert result.signal_name == "SIGKILL"
    assert result.exit_status == 137
    assert result.memory_peak.value is not None and result.memory_peak.value <= 64 * MiB


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "shmguard", "sandbox", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _wait_line(proc: subprocess.Popen[bytes], text: bytes) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert text in line, line


def test_sigterm_is_forwarded(root_only: None, no_leftovers: None) -> None:
    script = 'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.1; done'
    proc = _cli("--shm-size", "8m", "--", "sh", "-c", script)
    _wait_line(proc, b"ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 42
    assert b"got-term" in out


def test_child_ignoring_sigterm_is_killed_after_the_grace(
    root_only: None, no_leftovers: None
) -> None:
    marker = "0.2718"
    script = f'trap "" TERM; echo ready; while :; do sleep {marker}; done'
    proc = _cli("--shm-size", "8m", "--stop-timeout", "1", "--", "sh", "-c", script)
    _wait_line(proc, b"ready")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 137
    assert b"SIGTERM ignored for 1s" in err
    assert processes_with(f"sleep {marker}") == []


def test_shmguard_killed_takes_everything_down(root_only: None, tmp_path: Path) -> None:
    marker = "302.718"
    before = leftover_cgroups()
    proc = _cli(
        "--shm-size",
        "8m",
        "--memory",
        "256m",
        "--",
        "sh",
        "-c",
        f"echo ready; sleep {marker}",
        env=dict(os.environ, TMPDIR=str(tmp_path)),  # where the private TMPDIR is made
    )
    _wait_line(proc, b"ready")
    assert processes_with(f"sleep {marker}")
    proc.kill()
    proc.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while (processes_with(f"sleep {marker}") or leftover_cgroups() != before) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert processes_with(f"sleep {marker}") == []
    assert leftover_cgroups() == before
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []  # the command's private TMPDIR went too


def _nobody_can_import() -> None:
    """Skip unless a system Python that user nobody can run also imports shmguard from SRC."""
    if not os.access(SYSTEM_PY, os.X_OK):
        pytest.skip(f"{SYSTEM_PY} (runnable by nobody) is needed")
    code = f"import sys; sys.path.insert(0, {SRC!r}); import shmguard.measure.sandbox"
    done = _as_nobody(code)
    if done.returncode != 0:
        pytest.skip(f"user nobody cannot import shmguard from {SRC}: {done.stderr[-200:]}")


def _as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SYSTEM_PY, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )


NOBODY_CODE = f"""
import sys; sys.path.insert(0, {SRC!r})
from shmguard.measure.sandbox import SandboxError, SandboxSpec, run_sandboxed
spec = SandboxSpec(("sh", "-c", "id -u; df -k /dev/shm | tail -1"), 8 << 20)
r = run_sandboxed(spec, output="capture")
print(r.exit_status, r.user_namespace, r.memory_peak.reason is not None)
print(r.stdout_tail.decode(), end="")
try:
    run_sandboxed(SandboxSpec(("true",), 8 << 20, memory_limit=1 << 30))
except SandboxError as err:
    print("ERROR", err)
"""


def test_unprivileged_user_namespace_path(root_only: None) -> None:
    _nobody_can_import()
    done = _as_nobody(NOBODY_CODE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "0 True True"
    assert lines[1] == "65534"  # the command runs as the calling user, not as root
    assert lines[2].split()[:2] == ["tmpfs", "8192"]
    assert lines[3].startswith("ERROR cannot apply --memory: ")
    assert "run as root or without --memory" in lines[3]


DENIED_CODE = f"""
import sys; sys.path.insert(0, {SRC!r})
from shmguard.measure.sandbox import SandboxError, SandboxSpec, run_sandboxed
try:
    run_sandboxed(SandboxSpec(("true",), 8 << 20))
except SandboxError as err:
    print("ERROR", err)
"""

# Root makes a user namespace whose user.max_user_namespaces is 0, then becomes uid 65534 in it:
# from there no further user namespace can be created (ENOSPC), as on a locked-down host.
LOCKDOWN = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x10000000) == 0, ctypes.get_errno()
print("ready", flush=True)
sys.stdin.readline()
with open("/proc/sys/user/max_user_namespaces", "w") as fh:
    fh.write("0")
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
os.execv(sys.argv[1], [sys.argv[1], "-c", sys.argv[2]])
"""


def test_without_user_namespaces_the_error_says_what_is_missing(root_only: None) -> None:
    _nobody_can_import()
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKDOWN, SYSTEM_PY, DENIED_CODE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    Path(f"/proc/{proc.pid}/uid_map").write_text("0 0 1\n65534 65534 1\n")
    Path(f"/proc/{proc.pid}/gid_map").write_text("0 0 1\n65534 65534 1\n")
    out, err = proc.communicate("go\n", timeout=30)
    assert proc.returncode == 0, err
    assert out.startswith("ERROR cannot create an unprivileged user namespace: ")
    assert "max_user_namespaces=0" in out
    assert "Run shmguard as root (sudo)" in out

"""`shmguard run` with real processes: exec, --require against a real 64 MiB tmpfs (through the
sandbox), and --watch as a minimal init: signal forwarding, zombie reaping (as a subreaper and
as PID 1 of a PID namespace), exit statuses, output passed through unchanged."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from shmguard.measure.watched import diagnose_output, explain_runtime, shm_mount_line

RUN = [sys.executable, "-m", "shmguard", "run"]
SANDBOX_64M = [sys.executable, "-m", "shmguard", "sandbox", "--shm-size", "64m", "--"]


def run(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*RUN, *args], capture_output=True, timeout=timeout, check=False, **kw)


def after_banner(stderr: bytes) -> bytes:
    """stderr without the --brief line printed before the command starts."""
    first, _, rest = stderr.partition(b"\n")
    assert first.startswith(b"shmguard run: /dev/shm"), stderr
    return rest


# --------------------------------------------------------------------- exec (no --watch)


def test_exec_replaces_shmguard_keeps_stdout_clean_and_passes_the_status() -> None:
    proc = subprocess.Popen(
        [*RUN, "--brief", "--", "sh", "-c", 'echo "pid $$"; exit 5'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5
    assert out == f"pid {proc.pid}\n".encode()  # the command is the process shmguard was
    assert err.count(b"\n") == 1 and err.startswith(b"shmguard run: /dev/shm")


def _dispositions(action: signal.Handlers) -> Callable[[], None]:
    """A preexec_fn giving shmguard SIGHUP as ``action`` and default SIGINT and SIGQUIT,
    whatever this test inherited (pytest under ``nohup`` has SIGHUP ignored; started with
    ``&`` from a non-interactive shell, SIGINT and SIGQUIT too)."""

    def preexec() -> None:
        signal.signal(signal.SIGHUP, action)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)

    return preexec


@pytest.mark.parametrize("watch", [False, True])
def test_the_command_gets_default_signal_actions_and_an_empty_mask(watch: bool) -> None:
    # Python ignores SIGPIPE and SIGXFSZ; a plain os.execvp would hand that on (SigIgn 1001000).
    r = run(
        "--brief", *(["--watch"] if watch else []), "--", "grep", "^Sig[IB]", "/proc/self/status",
        preexec_fn=_dispositions(signal.SIG_DFL),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["SigBlk:", "0" * 16, "SigIgn:", "0" * 16]


@pytest.mark.parametrize("watch", [False, True])
def test_under_nohup_the_command_keeps_sighup_ignored(watch: bool) -> None:
    # nohup ignores SIGHUP so that the job outlives the terminal; exec hands that on, and so
    # does --watch (which resets the other forwarded signals to their defaults).
    r = run(
        "--brief", *(["--watch"] if watch else []), "--", "grep", "^SigIgn", "/proc/self/status",
        preexec_fn=_dispositions(signal.SIG_IGN),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["SigIgn:", f"{1 << (signal.SIGHUP - 1):016x}"]


@pytest.mark.parametrize(
    ("action", "ignored"), [(signal.SIG_DFL, 0), (signal.SIG_IGN, 1 << (signal.SIGHUP - 1))]
)
def test_the_sandboxed_command_keeps_sighup_ignored_only_under_nohup(
    action: signal.Handlers, ignored: int
) -> None:
    r = subprocess.run(
        [*SANDBOX_64M, "grep", "^SigIgn", "/proc/self/status"],
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=_dispositions(action),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["SigIgn:", f"{ignored:016x}"]


def test_under_nohup_watch_does_not_forward_a_hangup() -> None:
    proc = subprocess.Popen(
        [*RUN, "--brief", "--watch", "--", "sh", "-c", "echo ready; sleep 1.5; echo alive"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_dispositions(signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        os.kill(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read() == b"alive\n"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("watch", [False, True])
def test_missing_unknown_and_unrunnable_commands(tmp_path: Path, watch: bool) -> None:
    w = ["--watch"] if watch else []
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    cases = [
        ([], 127, "no command given; put it after `--`, e.g. `-- python train.py`"),
        (["no-such-command-xyz"], 127, "command not found: no-such-command-xyz (not on PATH)"),
        (["/etc/passwd"], 126, "command is not executable: /etc/passwd"),
        # exists and is executable, but execve fails (its interpreter is missing): 127
        ([str(bad)], 127, f"{bad}: No such file or directory"),
    ]
    for cmd, status, message in cases:
        r = run("--brief", *w, "--", *cmd)
        assert r.returncode == status, (cmd, r.stderr)
        lines = r.stderr.decode().splitlines()
        assert lines[-1] == f"shmguard: error: {message}", (cmd, lines)
        assert r.stdout == b""


def test_bad_options_are_usage_errors() -> None:
    r = run("--require", "64 MB MB", "--", "true")
    assert r.returncode == 2
    assert r.stderr.decode().startswith("shmguard: error: --require: invalid size '64 MB MB'")
    r = run("--watch", "--stall-after", "0", "--", "true")
    assert r.returncode == 2
    assert b"--stall-after: must be greater than 0" in r.stderr


# ------------------------------------------------------------- --require in a real tmpfs


@pytest.mark.root
@pytest.mark.parametrize("brief", [False, True])
def test_require_not_met_in_64_mib_exits_1_with_the_fix(
    root_only: None, no_leftovers: None, brief: bool
) -> None:
    b = ["--brief"] if brief else []
    r = subprocess.run(
        [*SANDBOX_64M, *RUN, *b, "--require", "1g", "--", "sh", "-c", "echo ran"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert r.stdout == b""  # the command never ran
    assert (
        "shmguard run: --require 1 GiB not met: /dev/shm has 64 MiB free, below the 1 GiB "
        "required (--require); not starting sh -c 'echo ran'"
    ) in err
    # the runtime-specific fix: what is there now plus the requirement, with headroom
    assert "--shm-size=1536m" in err  # 1 GiB + 25% would be 80% full
    if brief:
        assert err.splitlines()[0].endswith("--require 1 GiB: NOT MET")
        assert err.splitlines()[0].startswith("shmguard run: /dev/shm 64 MiB, 64 MiB free")
    else:
        flat = " ".join(err.replace("│", " ").split())  # the panel wraps at 80 columns
        assert "ENV002" in flat and "--require 1 GiB NOT met: not starting the command" in flat


@pytest.mark.root
@pytest.mark.parametrize("watch", [False, True])
def test_require_met_starts_the_command(root_only: None, no_leftovers: None, watch: bool) -> None:
    w = ["--watch"] if watch else []
    r = subprocess.run(
        [*SANDBOX_64M, *RUN, "--brief", *w, "--require", "32m", "--", "sh", "-c", "echo ran"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"ran\n"
    assert r.stderr.decode().splitlines() == [
        "shmguard run: /dev/shm 64 MiB, 64 MiB free · runtime "
        + r.stderr.decode().split("· runtime ")[1].split(" ·")[0]
        + " · verdict: warning ENV001 · --require 32 MiB: met"
    ]


# ------------------------------------------------------------------------ --watch: init

SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGHUP", "SIGWINCH", "SIGQUIT", "SIGINT", "SIGTERM")
TRAP = """
import signal, sys, time
def on(sig, frame):
    print("got", signal.Signals(sig).name, flush=True)
    if sig == signal.SIGTERM:
        sys.exit(7)
for name in NAMES:
    signal.signal(getattr(signal, name), on)
print("ready", flush=True)
while True:
    time.sleep(0.05)
""".replace("NAMES", repr(SIGNALS))


def test_watch_forwards_each_signal_and_exits_with_the_commands_status() -> None:
    proc = subprocess.Popen(
        [*RUN, "--brief", "--watch", "--", sys.executable, "-c", TRAP],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_dispositions(signal.SIG_DFL),  # a SIGHUP that nohup ignores is not forwarded
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        for name in SIGNALS:
            os.kill(proc.pid, getattr(signal, name))
            assert proc.stdout.readline() == f"got {name}\n".encode()
        assert proc.wait(timeout=30) == 7
    finally:
        proc.kill()
        proc.wait()
    assert proc.stdout.read() == b""
    # Ended as asked by a forwarded SIGTERM, nothing about /dev/shm: no diagnosis.
    assert proc.stderr is not None
    assert after_banner(proc.stderr.read()) == b""


@pytest.mark.parametrize(
    ("script", "status", "head"),
    [
        ("exit 3", 3, "exited with status 3"),
        ("kill -KILL $$", 137, "was killed by SIGKILL (exit 137)"),
        ("kill -BUS $$", 135, "was killed by SIGBUS (exit 135)"),
    ],
)
def test_watch_exit_statuses_and_the_report_of_a_failure(
    script: str, status: int, head: str
) -> None:
    r = run("--brief", "--watch", "--", "sh", "-c", script)
    assert r.returncode == status
    lines = after_banner(r.stderr).decode().splitlines()
    assert lines[0] == f"shmguard run: sh -c '{script}' {head}"
    assert lines[1].startswith("/dev/shm: peak ") and lines[1].endswith("sampled every 10 ms")
    assert lines[2].startswith("outcome: ")
    if status == 135:
        # classify() reads a SIGBUS as shm; the sampler knows /dev/shm was nowhere near full.
        assert lines[3].startswith("note: /dev/shm never came near full in this run")
    else:
        assert lines[-1].startswith("No /dev/shm cause found")


def test_watch_succeeds_silently() -> None:
    r = run("--brief", "--watch", "--", "true")
    assert r.returncode == 0
    assert after_banner(r.stderr) == b""


ORPHAN = """
import os, sys, time
shmguard = os.getppid()
middle = os.fork()
if middle == 0:
    if os.fork() == 0:  # the orphan: its parent exits at once
        time.sleep(0.3)
        print("orphan's parent", os.getppid(), flush=True)
        time.sleep(0.2)
        os._exit(0)
    os._exit(0)
os.waitpid(middle, 0)
time.sleep(1.5)
zombies = 0
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            stat = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        zombies += stat[0] == "Z" and int(stat[1]) == shmguard
print("zombies", zombies, "shmguard", shmguard, flush=True)
"""


def test_watch_adopts_and_reaps_orphans_as_a_subreaper() -> None:
    proc = subprocess.Popen(
        [*RUN, "--brief", "--watch", "--", sys.executable, "-c", ORPHAN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.decode().splitlines() == [
        f"orphan's parent {proc.pid}",  # reparented to shmguard, not to the host's init
        f"zombies 0 shmguard {proc.pid}",  # and reaped when it exited
    ]


def test_watch_passes_output_through_byte_for_byte() -> None:
    blob = bytes(range(256)) * 4096 + b"no newline at the end"
    code = (
        "import sys, os; b = bytes(range(256)) * 4096 + b'no newline at the end'; "
        "sys.stdout.buffer.write(b); sys.stdout.flush(); os.write(2, b[::-1])"
    )
    r = run("--brief", "--watch", "--", sys.executable, "-c", code)
    assert r.returncode == 0
    assert r.stdout == blob
    assert after_banner(r.stderr) == blob[::-1]


def test_watch_relays_everything_to_a_non_blocking_stdout() -> None:
    # O_NONBLOCK on a shared pipe (set by whoever else writes to it): EAGAIN is waited out.
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    code = "import sys; sys.stdout.buffer.write(b'x' * 4_000_000)"
    proc = subprocess.Popen(
        [*RUN, "--brief", "--watch", "--", sys.executable, "-c", code],
        stdout=w,
        stderr=subprocess.DEVNULL,
    )
    os.close(w)
    time.sleep(1.0)  # let the pipe fill while nobody reads
    got = 0
    while chunk := os.read(r, 1 << 20):
        got += len(chunk)
    os.close(r)
    assert proc.wait(timeout=60) == 0
    assert got == 4_000_000


def test_watch_keeps_the_order_of_stdout_and_stderr_sharing_one_file() -> None:
    # `> job.log 2>&1`: both fds are one pipe; two relays would reorder the lines.
    script = 'i=0; while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done'
    r = subprocess.run(
        [*RUN, "--brief", "--watch", "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0
    lines = after_banner(r.stdout).decode().splitlines()
    assert lines == [f"{s} {i}" for i in range(300) for s in ("out", "err")]


def test_watch_leaves_a_terminal_to_the_command() -> None:
    master, slave = pty.openpty()
    try:
        r = subprocess.run(
            [*RUN, "--brief", "--watch", "--", "sh", "-c", "test -t 1 && echo tty || echo pipe"],
            stdout=slave,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
        assert r.returncode == 0
        assert os.read(master, 1024).replace(b"\r", b"") == b"tty\n"
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.root
def test_watch_as_pid_1_gets_sigterm_forwards_it_and_reaps(root_only: None) -> None:
    # PID 1 of a PID namespace, as in a container: the kernel drops a signal whose action is
    # the default, so an init that does not block or handle SIGTERM never sees `docker stop`.
    cmd = ["sh", "-c", "echo pid $$; (sleep 0.2 &); exec sleep 60"]
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *RUN, "--brief", "--watch", "--", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"pid 2\n"  # shmguard is PID 1, the command 2
        (init,) = psutil.Process(proc.pid).children()
        assert "shmguard" in init.cmdline()
        time.sleep(1.0)  # the orphaned `sleep 0.2`, reparented to PID 1, has exited
        assert [c.status() for c in init.children()] == [psutil.STATUS_SLEEPING]
        started = time.monotonic()
        os.kill(init.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 5
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.root
def test_a_stop_signal_during_the_banner_is_kept_and_nothing_starts(root_only: None) -> None:
    # As PID 1 an unblocked SIGTERM is dropped; and `sleep`, exec'd as PID 1, would ignore it
    # forever. Sent every 50 ms from the start, one lands while the banner is being made.
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *RUN, "--", "sleep", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            for init in psutil.Process(proc.pid).children():
                with contextlib.suppress(psutil.Error):
                    init.send_signal(signal.SIGTERM)
            time.sleep(0.05)
        assert proc.wait(timeout=5) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert proc.stderr is not None
    assert proc.stderr.read().decode().splitlines()[-1] == (
        "shmguard run: SIGTERM received before the command started; not starting sleep 60"
    )


# ------------------------------------------------------------------------ library parts


def test_shm_mount_line_takes_the_mount_on_top(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "proc /proc proc rw 0 0\n"
        "tmpfs /dev/shm tmpfs rw,relatime,size=24684092k 0 0\n"
        "tmpfs /dev/shm/x tmpfs rw 0 0\n"
        "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
    )
    assert shm_mount_line(mounts) == (
        b"shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
    )
    assert shm_mount_line(tmp_path / "missing") == b""
    assert shm_mount_line(mounts, "/nowhere") == b""


def test_explain_runtime_keeps_only_runtimes_explain_knows() -> None:
    assert explain_runtime("docker") == "docker"
    assert explain_runtime("kubernetes") == "kubernetes"
    assert explain_runtime("none") is None
    assert explain_runtime("unknown") is None


def test_diagnose_output_reads_the_mount_size_beside_the_output() -> None:
    err = (
        b"RuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_0>: "
        b"No space left on device (28)\n"
    )
    mount = b"shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
    d = diagnose_output(b"loading\n", err, mount, runtime="docker")
    assert [i.name for i in d.inputs] == ["stderr", "stdout", "/proc/self/mounts"]
    assert d.results[0].id == "torch-shm-alloc-failed"
    assert [(f.name, f.bytes, f.file) for f in d.facts] == [
        ("shm_total", 64 * 2**20, "/proc/self/mounts")
    ]
    fix = d.results[0].fix
    assert fix is not None and fix.runtime == "docker"
    assert fix.shm_size is not None and fix.shm_size.bytes > 64 * 2**20
    assert diagnose_output(b"", b"").inputs[0].name == "output"

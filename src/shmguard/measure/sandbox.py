"""Run a command with its own tmpfs /dev/shm, optional memory/CPU limits, and nothing left behind.

The namespaces, the mount and the init live in a small helper process
(:mod:`shmguard.measure._nsinit`); this module plans the cgroups, starts the helper, relays the
child's output and signals, enforces timeouts and turns the helper's events into a
:class:`SandboxResult`. See docs/sandbox.md for the guarantees and their sources.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from shmguard.measure._nsinit import FORWARD, SI_KERNEL, hangup_ignored
from shmguard.measure._sigmask import MainMask
from shmguard.measure._threads import start_thread
from shmguard.measure.cgroups import CgroupPlan, plan_cgroups
from shmguard.measure.launch import HelperProcess, popen_helper
from shmguard.measure.sandbox_result import (
    TAIL_BYTES,
    RunInterrupted,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    Tail,
    build_result,
    signame,
)

__all__ = [
    "TAIL_BYTES",
    "RunInterrupted",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "SandboxSpec",
    "run_sandboxed",
]

#: What :meth:`Sandbox.wait` waits on: the forwarded signals and SIGCHLD.
_WAIT_SIGNALS = frozenset({*FORWARD, signal.SIGCHLD})
#: Signals that mean "the user wants this to stop" when shmguard receives them.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: One hold for every sandbox of the main thread (:class:`MainMask`).
_MAIN_MASK = MainMask(_WAIT_SIGNALS)


class Sandbox:
    """One sandboxed run. Use as a context manager: :meth:`start`, then :meth:`wait`.

    Args:
        spec: what to run.
        output: ``inherit`` (the command writes to our stdout/stderr directly), ``tee`` (bytes
            are copied unchanged to our fds 1 and 2 and the tails kept), or ``capture``
            (tails kept, nothing printed).
        on_output: called from a reader thread with each chunk (``"stdout"``/``"stderr"``,
            bytes) when output is piped.
        root: filesystem root for cgroup planning (tests use fixture trees).
        stdout_fd: where ``tee`` copies the command's stdout (2 keeps our stdout for JSON).

    Signals: :meth:`wait` called from the main thread blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT,
    SIGUSR1/2 and SIGWINCH for the wait and forwards them to the command; those a terminal sent
    to the whole process group (SIGINT, SIGQUIT with ``SI_KERNEL``) already reached it and are
    not sent twice. A forwarded SIGTERM/SIGINT/SIGHUP that is not obeyed within ``stop_grace``
    seconds is followed by SIGKILL of the whole PID namespace. The helper's parent-death signal
    is tied to the *thread* that calls :meth:`start`, so call it from a thread that outlives
    the run.
    """

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        output: str = "inherit",
        on_output: Callable[[str, bytes], None] | None = None,
        root: Path = Path("/"),
        stdout_fd: int = 1,
    ) -> None:
        if output not in ("inherit", "tee", "capture"):
            raise ValueError(f"output must be inherit, tee or capture, not {output!r}")
        if not spec.command:
            raise SandboxError("no command given")
        if spec.shm_size <= 0:
            raise SandboxError(f"shm size must be > 0 bytes, got {spec.shm_size}")
        self.spec = spec
        self.output = output
        self.on_output = on_output
        self.root = root
        self.stdout_fd = stdout_fd
        self.plan = CgroupPlan()
        self.proc: HelperProcess | None = None
        self.init_pid: int | None = None
        self.events: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self._threads: list[threading.Thread] = []
        self._tails = {"stdout": Tail(), "stderr": Tail()}
        self._started = 0.0
        self._stopped_by: str | None = None
        self._stop_kill_at: float | None = None
        self._interrupted: str | None = None
        self._result: SandboxResult | None = None
        self._gate_w: int | None = None
        self._holds_mask = False
        self._tmpdir: str | None = None
        self._nohup = hangup_ignored()

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_gate()
        self._restore_mask()
        if self.proc is not None and self.proc.poll() is None:
            self.kill("aborted")
            self.proc.wait()
        self._finish_threads()
        self._remove_tmpdir()

    @property
    def tmpdir(self) -> str | None:
        """The command's private TMPDIR (removed when the sandbox ends), once started."""
        return self._tmpdir

    def _remove_tmpdir(self) -> None:
        # Only after the PID namespace is gone: nothing of the command can still use it.
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    @property
    def pid(self) -> int | None:
        """Host PID of the helper (lives in the sandbox's mount namespace), once started."""
        return self.proc.pid if self.proc else None

    @property
    def shm_path(self) -> Path:
        """The sandbox's /dev/shm as seen from outside: ``/proc/<helper>/root/dev/shm``."""
        if self.proc is None:
            raise SandboxError("sandbox not started")
        return Path(f"/proc/{self.proc.pid}/root/dev/shm")

    @property
    def memory_usage_file(self) -> Path | None:
        """The memory cgroup's current-usage file, when there is one."""
        cg = self.plan.get("memory")
        return Path(cg.dir) / cg.usage if cg and cg.usage else None

    def start(self, *, hold: bool = False) -> None:
        """Create cgroups and namespaces, mount the tmpfs, start the command.

        Args:
            hold: set everything up but execute the command only at :meth:`release` (so a
                sampler can take its first poll before the command allocates anything).

        Raises:
            SandboxError: a limit was asked for and cannot be applied, or namespaces/mounts
                are not permitted; the message names what is missing.
        """
        spec = self.spec
        try:
            self.plan = plan_cgroups(
                spec.memory_limit, spec.cpus, spec.account_memory, root=self.root
            )
        except ValueError as err:
            raise SandboxError(str(err)) from None
        if spec.memory_limit is not None and "memory" in self.plan.unavailable:
            raise SandboxError(
                f"cannot apply --memory: {self.plan.unavailable['memory']}; "
                "run as root or without --memory"
            )
        if spec.cpus is not None and "cpu" in self.plan.unavailable:
            raise SandboxError(
                f"cannot apply --cpus: {self.plan.unavailable['cpu']}; "
                "run as root or without --cpus"
            )
        # From here on a SIGTERM/SIGINT to shmguard in the main thread stays pending until
        # wait() forwards it: one that came while the namespace was being set up (a slow
        # start on a busy machine) ended shmguard by its default action and left the command.
        if threading.current_thread() is threading.main_thread():
            self._hold_mask()
        # A private TMPDIR, removed at the end: multiprocessing (so every PyTorch DataLoader)
        # makes /tmp/pymp-* directories that its workers delete only when they exit cleanly;
        # a worker killed by the teardown would leave them behind on the host.
        self._tmpdir = tempfile.mkdtemp(prefix="shmguard-tmp-")
        env = dict(spec.env) if spec.env is not None else dict(os.environ)
        env["TMPDIR"] = self._tmpdir
        status_r, status_w = os.pipe()
        gate_r, self._gate_w = os.pipe()
        helper_spec = {
            "command": list(spec.command),
            "shm_size": spec.shm_size,
            "cgroups": [
                {
                    "controller": d.controller,
                    "dir": d.dir,
                    "writes": [list(w) for w in d.writes],
                    "procs": d.procs,
                    "peak": d.peak,
                    "events": d.events,
                }
                for d in self.plan.dirs
            ],
            "mount_proc": spec.mount_proc,
            "nohup": self._nohup,
            "status_fd": status_w,
            "gate_fd": gate_r,
            "parent_pid": os.getpid(),
            "tmpdir": self._tmpdir,
        }
        piped = self.output != "inherit"
        if self.output == "tee":
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
        self._started = time.monotonic()
        try:
            self.proc = (spec.launcher or popen_helper)(helper_spec, piped, env)
        except BaseException:
            self._close_gate()
            self._remove_tmpdir()
            self._restore_mask()
            raise
        finally:
            os.close(status_w)
            os.close(gate_r)
        self._spawn(self._read_status, status_r)
        if piped:
            assert self.proc.stdout is not None and self.proc.stderr is not None
            self._spawn(self._pump, "stdout", self.proc.stdout)
            self._spawn(self._pump, "stderr", self.proc.stderr)
        deadline = time.monotonic() + 30
        while not self._ready.wait(0.01):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
        error = next((e for e in self.events if e["event"] == "error"), None)
        if error is not None or self.init_pid is None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self._finish_threads()
            error = next((e for e in self.events if e["event"] == "error"), error)
            msg = error["message"] if error else f"sandbox helper exited {self.proc.returncode}"
            self._close_gate()
            self._remove_tmpdir()
            self._restore_mask()
            raise SandboxError(msg)
        if not hold:
            self.release()

    def release(self) -> None:
        """Let a command started with ``hold=True`` run (a no-op when already released).

        In the main thread the signals :meth:`wait` forwards are blocked from :meth:`start`
        on, so one sent to shmguard between then and :meth:`wait` stays pending and is
        forwarded, rather than ending shmguard by its default action while the command runs
        on.
        """
        if self._gate_w is None:
            return
        if threading.current_thread() is threading.main_thread():
            self._hold_mask()
        with contextlib.suppress(OSError):
            os.write(self._gate_w, b"g")
        self._close_gate()

    def _hold_mask(self) -> None:
        if not self._holds_mask:
            _MAIN_MASK.hold()
            self._holds_mask = True

    def _restore_mask(self) -> None:
        """Give up this sandbox's hold on the main thread's block (:class:`_MainMask`)."""
        if self._holds_mask:
            self._holds_mask = False
            _MAIN_MASK.drop()

    def _close_gate(self) -> None:
        if self._gate_w is not None:
            with contextlib.suppress(OSError):
                os.close(self._gate_w)
            self._gate_w = None

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        self._threads.append(start_thread(target, *args))

    def _read_status(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as fh:
            for raw in fh:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                self.events.append(event)
                if event["event"] == "ready":
                    self.init_pid = int(event["init_pid"])
                    self._ready.set()
                elif event["event"] == "error":
                    self._ready.set()

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        out_fd = self.stdout_fd if name == "stdout" else 2
        fd = stream.fileno()
        tail = self._tails[name]
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            tail.add(chunk)
            if self.output == "tee":
                try:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out_fd, view) :]
                except BrokenPipeError:
                    # Our reader is gone (`shmguard measure -- cmd | head`): close the pipe so
                    # the command gets EPIPE/SIGPIPE as it would without us, instead of being
                    # drained forever.
                    break
                except OSError:
                    pass
            if self.on_output is not None:
                self.on_output(name, chunk)
        stream.close()

    def _finish_threads(self) -> None:
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []

    # ---------------------------------------------------------------------- control

    def tree_pids(self) -> list[int]:
        """Host PIDs of the command and everything it forked (not the helper processes)."""
        import psutil

        if self.init_pid is None:
            return []
        try:
            return [p.pid for p in psutil.Process(self.init_pid).children(recursive=True)]
        except psutil.Error:
            return []

    def kill(self, reason: str) -> None:
        """SIGKILL the whole PID namespace now; ``reason`` is reported as ``stopped_by``."""
        if self._stopped_by is None:
            self._stopped_by = reason
        target = self.init_pid or (self.proc.pid if self.proc else None)
        if target is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, signal.SIGKILL)

    def stop(self, reason: str, grace: float = 5.0) -> None:
        """Stop the command cleanly: SIGTERM now, SIGKILL of the whole PID namespace if it is
        still running ``grace`` seconds later (checked by :meth:`wait`); ``reason`` is reported
        as ``stopped_by`` either way. A second call changes nothing."""
        if self._stopped_by is not None:
            return
        self._stopped_by = reason
        self._stop_kill_at = time.monotonic() + grace
        self.send(signal.SIGTERM)

    def send(self, sig: int) -> None:
        """Send ``sig`` to the command (through the helper, which forwards it)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def _build_result(self) -> SandboxResult:
        assert self.proc is not None
        return build_result(
            self.events,
            self.plan,
            self.proc.returncode,
            started=self._started,
            stopped_by=self._stopped_by,
            interrupted=self._interrupted,
            stdout_tail=self._tails["stdout"].value(),
            stderr_tail=self._tails["stderr"].value(),
        )

    def wait(
        self,
        timeout: float | None = None,
        stop_check: Callable[[], str | None] | None = None,
        tick: float = 0.05,
        stop_grace: float = 10.0,
    ) -> SandboxResult:
        """Wait for the command, forwarding signals; stop it on timeout or ``stop_check``.

        Args:
            timeout: seconds after which the namespace is killed (``stopped_by="timeout"``).
            stop_check: called every ``tick`` seconds; a non-None return is the reason to kill
                the namespace now (e.g. ``"hang"``).
            tick: polling period in seconds.
            stop_grace: seconds a forwarded SIGTERM/SIGINT/SIGHUP may take before SIGKILL.

        Returns:
            the :class:`SandboxResult` (also after a kill).
        """
        if self.proc is None:
            raise SandboxError("sandbox not started")
        main = threading.current_thread() is threading.main_thread()
        if self._result is not None:
            if main:
                self._restore_mask()
            return self._result
        wanted = _WAIT_SIGNALS
        if main:
            self._hold_mask()
        kill_at: float | None = None
        pending_name: str | None = None
        try:
            while self.proc.poll() is None:
                now = time.monotonic()
                if timeout is not None and now - self._started > timeout:
                    self.kill("timeout")
                elif kill_at is not None and now > kill_at:
                    self.kill(f"{pending_name} ignored for {stop_grace:g}s")
                elif self._stop_kill_at is not None and now > self._stop_kill_at:
                    self.kill("stop")  # keeps the reason given to stop()
                elif stop_check is not None:
                    reason = stop_check()
                    if reason:
                        self.kill(reason)
                if not main:
                    time.sleep(tick)
                    continue
                info = signal.sigtimedwait(wanted, tick)
                if info is None or info.si_signo == signal.SIGCHLD:
                    continue
                sig = info.si_signo
                if sig == signal.SIGHUP and self._nohup:
                    continue  # started under nohup: the hangup is ignored, as nohup asked
                if sig in _STOP_SIGNALS and self._interrupted is None:
                    self._interrupted = signame(sig)
                if sig in (signal.SIGINT, signal.SIGQUIT) and info.si_code == SI_KERNEL:
                    continue  # from the terminal: the command's process group has it already
                self.send(sig)
                if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) and kill_at is None:
                    kill_at = time.monotonic() + stop_grace
                    pending_name = signame(sig)
        finally:
            if main:
                self._restore_mask()
        self.proc.wait()
        self._finish_threads()
        self._result = self._build_result()
        self._remove_tmpdir()
        return self._result


def run_sandboxed(
    spec: SandboxSpec,
    *,
    output: str = "inherit",
    timeout: float | None = None,
    stop_grace: float = 10.0,
) -> SandboxResult:
    """Start ``spec`` in a :class:`Sandbox` and wait for it (see :meth:`Sandbox.wait`).

    Raises:
        SandboxError: the sandbox could not be set up.
    """
    with Sandbox(spec, output=output) as box:
        box.start()
        return box.wait(timeout=timeout, stop_grace=stop_grace)

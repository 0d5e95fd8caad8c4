"""The minimal init behind ``shmguard run --watch``: start a command, forward signals, reap
zombies, pass its output through.

Why each part (sources: signal(7), pid_namespaces(7), prctl(2), execve(2), waitpid(2)):

* **Signals.** The forwarded ones (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGWINCH, as
  the sandbox forwards) and SIGCHLD are blocked in the calling (main) thread *before* any
  thread starts, so every later thread inherits the mask and a signal sent to shmguard waits
  for :meth:`Supervisor.wait`'s ``sigtimedwait`` instead of killing shmguard by its default
  action. As PID 1 of a container's PID namespace this is also what makes SIGTERM arrive at
  all: the kernel drops a signal to PID 1 whose action is the default unless it is blocked or
  handled (pid_namespaces(7); ``sig_ignored`` in kernel/signal.c never ignores a blocked
  signal). SIGINT and SIGQUIT typed at a terminal (``si_code`` ``SI_KERNEL``) already reached
  the command, which shares shmguard's process group, and are not sent twice.
* **Zombies.** As PID 1 shmguard inherits every orphan of the container; elsewhere it asks to
  be a child subreaper (``PR_SET_CHILD_SUBREAPER``), so the orphans of the command's tree (a
  DataLoader worker whose parent died) are reparented to it rather than to the host's init.
  Either way each SIGCHLD reaps every exited child with ``waitpid(-1, WNOHANG)``.
* **Output.** A stream that is a terminal is inherited as it is (the command keeps its tty:
  colours, progress bars, line buffering, job control), and is not scanned. A stream that is
  not a terminal (``docker logs``, ``kubectl logs``, a pipe or a file: where a diagnosis is
  wanted later) goes through a pipe that shmguard copies unchanged, byte for byte and in order
  within the stream, to the same file descriptor, keeping the last :data:`TAIL_BYTES` for the
  diagnosis and handing each chunk to ``on_output`` (the stall detector). Docker and Kubernetes
  keep stdout and stderr as two separate streams already, so relaying them through two pipes
  changes nothing a log reader sees.
* **Start.** The command is forked first and executes only at :meth:`Supervisor.release`, so a
  sampler can take its first poll before the command allocates anything. A failed ``execvp``
  is reported through a close-on-exec pipe (127 when not found, 126 otherwise, as a shell and
  ``docker run`` do), never confused with a command that exits 127 itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from shmguard.measure._nsinit import (
    SI_KERNEL,
    TTY_SIGNALS,
    WAIT_SET,
    command_signals,
    hangup_ignored,
)
from shmguard.measure._threads import start_thread
from shmguard.measure.execute import STOP_SIGNALS, exec_failure, signal_name
from shmguard.measure.sandbox import TAIL_BYTES

#: prctl(2) option: orphaned descendants are reparented to this process (Linux 3.4+).
PR_SET_CHILD_SUBREAPER = 36
#: Seconds the output pipes may take to drain after the command ended (a background process
#: that inherited them could keep them open forever).
DRAIN_S = 1.0


@dataclass(frozen=True)
class ChildExit:
    """How the supervised command ended.

    Attributes:
        exit_status: shell convention: the exit code, ``128+N`` when signal N killed it, 127
            (not found) or 126 (not executable) when it could not be executed.
        exit_code: the exit code when it exited, else None.
        signal: the signal that killed it, else None.
        exec_error: ``"<cmd>: No such file or directory"`` when it could not be executed.
        interrupted: the first stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) shmguard received
            and forwarded, else None.
        stopped_by: the reason shmguard stopped the command itself (``hang``), else None.
        orphans_reaped: exited processes other than the command that shmguard reaped.
    """

    exit_status: int
    exit_code: int | None
    signal: int | None
    exec_error: str | None
    interrupted: str | None
    stopped_by: str | None
    orphans_reaped: int

    @property
    def signal_name(self) -> str | None:
        """``SIGBUS`` and the like when a signal killed the command, else None."""
        return signal_name(self.signal) if self.signal is not None else None


class _Tail:
    def __init__(self) -> None:
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * TAIL_BYTES:
            del self.data[:-TAIL_BYTES]

    def value(self) -> bytes:
        return bytes(self.data[-TAIL_BYTES:])


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; whether it succeeded."""
    return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)) == 0


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; on a non-blocking fd (O_NONBLOCK set by whoever shares it) wait
    until it is writable instead of dropping the rest."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)


class Supervisor:
    """Run one command as a minimal init would. Call :meth:`spawn`, :meth:`release`, then
    :meth:`wait`, all from the main thread; :meth:`close` (or the context manager) restores
    the signal mask.

    Args:
        argv: the command (looked up on PATH by ``execvp``).
        on_output: called from a reader thread with ``("stdout"|"stderr", chunk)`` for every
            chunk of a relayed stream, after it was written out.

    Raises:
        RuntimeError: :meth:`spawn` called outside the main thread (signals can be waited for
            only there).
    """

    def __init__(
        self, argv: list[str], on_output: Callable[[str, bytes], None] | None = None
    ) -> None:
        if not argv:
            raise ValueError("no command given")
        self.argv = list(argv)
        self._nohup = False
        self.on_output = on_output
        self.pid: int | None = None
        self.subreaper = False
        self._mask: set[int | signal.Signals] | None = None
        self._gate_w: int | None = None
        self._err_r: int | None = None
        self._tails = {"stdout": _Tail(), "stderr": _Tail()}
        self._threads: list[threading.Thread] = []
        self.relayed: tuple[str, ...] = ()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- start

    def spawn(self) -> None:
        """Block the forwarded signals, become a subreaper (when not PID 1) and fork the
        command, held until :meth:`release`. Call before starting any thread."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("Supervisor.spawn must run in the main thread")
        self._nohup = hangup_ignored()
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, WAIT_SET)
        if os.getpid() != 1:
            self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        pipes = self._plan_pipes()
        gate_r, self._gate_w = os.pipe()
        self._err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its behaviour is tested end to end
            self._child(pipes, gate_r, err_w)
        self.pid = pid
        os.close(gate_r)
        os.close(err_w)
        names = {1: "stdout", 2: "stderr"}
        for fd, (r, w) in pipes.items():
            if fd == 2 and pipes.get(1) == (r, w):
                continue  # one pipe for both (see _plan_pipes)
            os.close(w)
            self._threads.append(start_thread(self._pump, names[fd], r, fd))
        self.relayed = tuple(names[fd] for fd in pipes)

    @staticmethod
    def _plan_pipes() -> dict[int, tuple[int, int]]:
        """A pipe for each of fds 1 and 2 that is open and not a terminal. When both are the
        same file (``> job.log 2>&1``, ``2>&1 | tee``) they share one pipe, relayed by one
        thread to fd 1, so the order of stdout and stderr lines in that file stays exactly as
        the command wrote them."""
        pipes: dict[int, tuple[int, int]] = {}
        stats = {}
        for fd in (1, 2):
            try:
                st = os.fstat(fd)
                tty = os.isatty(fd)
            except OSError:  # closed: the command inherits the closed fd as it would
                continue
            if tty:
                continue
            stats[fd] = (st.st_dev, st.st_ino)
            if fd == 2 and stats.get(1) == stats[2] and 1 in pipes:
                pipes[2] = pipes[1]
            else:
                pipes[fd] = os.pipe()
        return pipes

    def _child(self, pipes: dict[int, tuple[int, int]], gate_r: int, err_w: int) -> None:
        """In the forked child: wire the pipes, wait for the gate, execute. Never returns."""
        try:
            # The parent's ends: a copy held here would hide the parent closing the gate.
            for fd in (self._gate_w, self._err_r):
                if fd is not None:
                    os.close(fd)
            for fd, (_r, w) in pipes.items():
                os.dup2(w, fd)  # dup2 leaves the new fd inheritable
            for r, w in set(pipes.values()):
                os.close(w)
                os.close(r)
            if os.read(gate_r, 1) != b"g":  # EOF: shmguard gave up before releasing it
                os._exit(125)
            # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across
            # execve(2), so restore the defaults the command expects (SIGHUP stays ignored
            # under nohup), and the empty mask.
            command_signals(self._nohup)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.execvp(self.argv[0], self.argv)
        except OSError as err:
            code = err.errno or errno.ENOEXEC
            with contextlib.suppress(OSError):
                os.write(err_w, str(code).encode())
            os._exit(exec_failure(self.argv[0], code)[0])
        finally:
            os._exit(125)

    def release(self) -> None:
        """Let the command execute (a no-op the second time)."""
        if self._gate_w is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._gate_w, b"g")
        os.close(self._gate_w)
        self._gate_w = None

    # ---------------------------------------------------------------- output

    def _pump(self, name: str, fd: int, out_fd: int) -> None:
        tail = self._tails[name]
        relay = True
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                tail.add(chunk)
                if relay:
                    try:
                        _write_all(out_fd, chunk)
                    except BrokenPipeError:
                        # Our reader is gone: close the pipe so the command sees EPIPE as it
                        # would have without us, rather than being drained forever.
                        break
                    except OSError:
                        relay = False
                if self.on_output is not None:
                    self.on_output(name, chunk)
        finally:
            os.close(fd)

    def tails(self) -> tuple[bytes, bytes]:
        """The last bytes of the relayed stdout and stderr (empty for an inherited one)."""
        return self._tails["stdout"].value(), self._tails["stderr"].value()

    def tree_pids(self) -> list[int]:
        """PIDs of every live descendant of shmguard: the command, its children and the
        orphans reparented to shmguard."""
        import psutil

        try:
            return [p.pid for p in psutil.Process().children(recursive=True)]
        except psutil.Error:
            return []

    # ------------------------------------------------------------------ wait

    def wait(
        self,
        stop_check: Callable[[], str | None] | None = None,
        on_stop: Callable[[str], None] | None = None,
        *,
        stop_grace: float = 10.0,
        tick: float = 0.1,
    ) -> ChildExit:
        """Forward signals and reap children until the command has exited.

        Args:
            stop_check: called every ``tick`` seconds; a non-None reason (``hang``) stops the
                command: ``on_stop(reason)``, then SIGTERM, then SIGKILL of the command and
                every descendant still alive after ``stop_grace`` seconds.
            on_stop: called once, before the command is stopped (the CLI prints the
                diagnosis there, while the command's state is still as it was).
            stop_grace: seconds between the SIGTERM and the SIGKILL of a stop.
            tick: seconds between checks.
        """
        if self.pid is None:
            raise RuntimeError("Supervisor.wait before spawn")
        self.release()
        wanted = set(WAIT_SET)
        status: int | None = None
        reaped = 0
        interrupted: str | None = None
        stopped_by: str | None = None
        kill_at: float | None = None
        while status is None:
            while True:  # reap everything that has exited, the command included
                try:
                    done, st = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    done, st = 0, 0
                if done == 0:
                    break
                if done == self.pid:
                    status = st
                else:
                    reaped += 1
            if status is not None:
                break
            if kill_at is not None and time.monotonic() >= kill_at:
                self._kill_tree()
                kill_at = float("inf")
            elif stop_check is not None and stopped_by is None:
                reason = stop_check()
                if reason:
                    stopped_by = reason
                    if on_stop is not None:
                        on_stop(reason)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGTERM)
                    kill_at = time.monotonic() + stop_grace
            info = signal.sigtimedwait(wanted, tick)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            sig = info.si_signo
            if sig == signal.SIGHUP and self._nohup:
                continue  # started under nohup: the hangup is ignored, as nohup asked
            if sig in STOP_SIGNALS and interrupted is None:
                interrupted = signal_name(sig)
            if sig in TTY_SIGNALS and info.si_code == SI_KERNEL:
                continue  # typed at the terminal: the command's process group has it
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
        self._drain()
        return self._exit(status, reaped, interrupted, stopped_by)

    def _kill_tree(self) -> None:
        for pid in [p for p in self.tree_pids() if p != self.pid] + [self.pid or 0]:
            if pid > 0:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN_S
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def _exit(
        self, st: int, reaped: int, interrupted: str | None, stopped_by: str | None
    ) -> ChildExit:
        exec_error: str | None = None
        if self._err_r is not None:
            try:
                data = os.read(self._err_r, 64)
            except OSError:
                data = b""
            os.close(self._err_r)
            self._err_r = None
            if data:
                status, exec_error = exec_failure(self.argv[0], int(data))
                return ChildExit(status, status, None, exec_error, interrupted, None, reaped)
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            return ChildExit(128 + sig, None, sig, None, interrupted, stopped_by, reaped)
        code = os.WEXITSTATUS(st)
        return ChildExit(code, code, None, None, interrupted, stopped_by, reaped)

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """Release a held command (it then exits 125), kill a command still running, stop
        being a subreaper, and restore the signal mask, dropping pending SIGCHLDs."""
        if self._gate_w is not None:
            os.close(self._gate_w)  # EOF: the held child exits 125 without executing
            self._gate_w = None
        if self.pid is not None:
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(self.pid, os.WNOHANG)
                if done == 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
        if self._err_r is not None:
            os.close(self._err_r)
            self._err_r = None
        if self.subreaper:
            self.subreaper = not _prctl(PR_SET_CHILD_SUBREAPER, 0)
        if self._mask is not None:
            while signal.sigtimedwait({signal.SIGCHLD}, 0) is not None:
                pass
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            self._mask = None

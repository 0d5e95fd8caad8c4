"""The parent side of tune's fork server (:mod:`shmguard.torch.tuning._zygote`).

:func:`start` starts it and waits until it has imported torch and the loader's module;
:meth:`Zygote.launch` is a :data:`~shmguard.measure.launch.Launcher`: the sandbox of a trial
gets its helper forked from the server instead of a fresh ``python -I -S _nsinit.py``, as a
:class:`ForkedHelper` that behaves like the :class:`subprocess.Popen` it would hold.

Memory: a forked trial shares the server's pages and its memory cgroup is charged only for
the ones it changes, while a fresh process is charged for all it allocates (``import torch``
alone: about 150 MB here). So the server's anonymous memory (:attr:`Zygote.anon`) is taken off
each forked trial's memory limit and added to its measured peak: a trial can use no more than
a fresh process could, and a page both shared and changed is counted twice, which errs on the
safe side.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
from typing import IO, Any

from shmguard.measure.launch import HelperProcess, popen_helper

#: The module whose ``python -m`` command a forked trial runs in-process.
CHILD = "shmguard.torch.tuning._child"
#: Largest control message (a helper spec with the environment).
MESSAGE = 1 << 20


class ForkedHelper:
    """A sandbox helper forked by the server (a :class:`~shmguard.measure.launch.HelperProcess`):
    its exit status comes from the server, which is its parent."""

    def __init__(self, zygote: Zygote, pid: int, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.zygote = zygote
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None

    def _receive(self, timeout: float | None) -> None:
        sock = self.zygote.sock
        if not select.select([sock], [], [], timeout)[0]:
            return
        try:
            msg = sock.recv(MESSAGE)
        except OSError:
            msg = b""
        if not msg:  # the server is gone, and the helper with it (its death signal)
            self.zygote.dead = True
            self.returncode = -signal.SIGKILL
            return
        self.returncode = int(json.loads(msg)["exit"])

    def poll(self) -> int | None:
        """The exit status, or None while the helper runs."""
        if self.returncode is None:
            self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the helper's end; its exit status.

        Raises:
            subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
        """
        if self.returncode is None:
            self._receive(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(CHILD, timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the helper (its namespace goes down with it)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class Zygote:
    """A started fork server, ready (see :func:`start`).

    Attributes:
        proc: the server process.
        sock: the parent's end of the control socket.
        anon: the server's anonymous resident bytes once ready (see the module docstring).
        dead: the server ended (then :meth:`launch` starts fresh helpers).
    """

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, anon: int) -> None:
        self.proc = proc
        self.sock = sock
        self.anon = anon
        self.dead = False
        self._current: ForkedHelper | None = None

    def launch(self, spec: dict[str, Any], piped: bool, env: dict[str, str]) -> HelperProcess:
        """A :data:`~shmguard.measure.launch.Launcher`: the helper forked by the server when
        the command is a tune trial's and its output is piped, else a fresh one."""
        command = spec["command"]
        if self.dead or not piped or command[1:3] != ["-m", CHILD]:
            return popen_helper(spec, piped, env)
        if self._current is not None and self._current.returncode is None:
            self._current.wait()  # one at a time: the sandbox has waited for it already
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fds = [spec["status_fd"], spec["gate_fd"], out_w, err_w]
        try:
            socket.send_fds(self.sock, [json.dumps({"spec": spec, "env": env}).encode()], fds)
            ready = select.select([self.sock], [], [], 30)[0]
            msg = self.sock.recv(MESSAGE) if ready else b""
        except OSError:
            msg = b""
        finally:
            os.close(out_w)
            os.close(err_w)
        if not msg:
            os.close(out_r)
            os.close(err_r)
            self.close()
            return popen_helper(spec, piped, env)
        pid = int(json.loads(msg)["pid"])
        # The sandbox's output readers own and close them, as Popen's pipes.
        out, err = open(out_r, "rb"), open(err_r, "rb")  # noqa: SIM115
        self._current = ForkedHelper(self, pid, out, err)
        return self._current

    def close(self, grace: float = 5.0) -> None:
        """End the server: end of file on its socket, then SIGKILL after ``grace`` seconds
        (at once with 0: it may still be importing and read nothing until it is done)."""
        self.dead = True
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(
    loader: str, env: dict[str, str], memory: int | None, timeout: float
) -> tuple[Zygote | None, str]:
    """Start the fork server for ``loader`` (``MODULE:FACTORY``) in ``env`` and wait until it
    is ready, at most ``timeout`` seconds.

    Returns:
        ``(zygote, "")``, or ``(None, why)`` when the trials must each start a fresh Python:
        the server did not start or get ready; the loader's module started threads at import
        (forking a process with running threads can copy a held lock); it holds /dev/shm files
        (they would be the host's, not the trial's); or the ``memory`` budget is not above the
        server's own memory (a fresh trial would not get past its imports either).

    Raises:
        KeyboardInterrupt: Ctrl-C while waiting (the server is ended first).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = [sys.executable, "-m", "shmguard.torch.tuning._zygote", str(theirs.fileno()), loader,
            str(os.getpid())]  # fmt: skip
    try:
        proc = subprocess.Popen(
            argv,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError as err:
        ours.close()
        return None, f"the fork server did not start: {err.strerror}"
    finally:
        theirs.close()
    zygote = Zygote(proc, ours, 0)
    try:
        ready = select.select([ours], [], [], timeout)[0]
        msg = ours.recv(MESSAGE) if ready else b""
    except BaseException:
        zygote.close(grace=0)
        raise
    why = ""
    facts: dict[str, Any] = json.loads(msg) if msg else {}
    if not facts.get("ready"):
        why = "the fork server did not get ready" + ("" if ready else f" in {timeout:g} s")
    elif facts["threads"] > 1:
        why = f"{loader}'s module started {facts['threads'] - 1} thread(s) at import"
    elif facts["shm"]:
        why = f"{loader}'s module holds /dev/shm files at import ({facts['shm'][0]})"
    elif memory is not None and memory <= facts["anon"]:
        why = "the memory budget is not above what torch and the loader's module take"
    if why:
        zygote.close(grace=0 if not msg else 5.0)
        return None, why
    zygote.anon = int(facts["anon"])
    return zygote, ""

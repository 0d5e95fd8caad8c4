"""tune's fork server (a *zygote*): one process that imports torch and the loader's module once
and forks every trial's sandbox helper from there.

``python -m shmguard.torch.tuning._zygote CTRL_FD MODULE:FACTORY PARENT_PID``; the parent side
is :mod:`shmguard.torch.tuning.zygote`. A fresh trial pays Python's start-up and ``import
torch`` (2.1 s of a 2.3 s trial on this project's 2-CPU machine) before its first batch; a
trial forked from here starts with both done. Each trial is still a process of its own in a
sandbox of its own: the forked helper runs the sandbox helper's code as its script would
(:func:`shmguard.measure.launch.run_helper`: new mount and PID namespaces, a fresh tmpfs
/dev/shm, the trial's cgroups, an init as PID 1),
and the command it forks runs :mod:`shmguard.torch.tuning._child` in that process instead of
executing ``python -m`` anew. A trial that crashes, hangs or is killed takes only its own
namespace down; this process only forks and waits.

Protocol on the ``SOCK_SEQPACKET`` socket ``CTRL_FD`` (one JSON object a message):

* once the imports are done: ``{"ready": true, "threads": N, "shm": [...], "anon": BYTES,
  "imported": bool, "error": "..."}``: the threads running (``threading``'s, or 1 + those
  the loader's module started, native ones included: ``/proc/self/task``), what of
  /dev/shm it maps or holds open, its anonymous resident memory (``RssAnon``, proc(5)), whether
  the loader's module imported (when not, each trial imports it again and reports the error);
* then per trial, from the parent: ``{"spec": HELPER_SPEC, "env": {...}}`` with the descriptors
  (``SCM_RIGHTS``, unix(7)) status, gate, stdout and stderr; the answers ``{"pid": N}``, and
  ``{"exit": CODE}`` (as :attr:`subprocess.Popen.returncode`) when that helper has ended.

End of file on the socket ends it; it dies with its parent (``PR_SET_PDEATHSIG``, prctl(2)), and
its helpers with it (theirs). It ignores SIGINT: a terminal's Ctrl-C reaches the whole process
group, the trial takes it as a fresh Python would, and shmguard decides what to stop.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import traceback
from typing import Any, NoReturn

from shmguard.torch.tuning.zygote import CHILD, MESSAGE

_PR_SET_PDEATHSIG = 1


def _send(sock: socket.socket, **data: Any) -> None:
    sock.send(json.dumps(data).encode())


def run_child(cmd: list[str]) -> int:
    """Run ``python -m shmguard.torch.tuning._child ARG`` (``cmd``) in this process, as a fresh
    interpreter would: its signal settings, ``sys.argv``, its exit status (``SystemExit``,
    1 and a traceback for an uncaught exception, death by SIGINT for an uncaught
    ``KeyboardInterrupt``), the ``atexit`` functions and flushed output. Any other command is
    executed."""
    if cmd[1:3] != ["-m", CHILD]:
        os.execvp(cmd[0], cmd)
    # A fresh interpreter's signal settings (the sandbox reset them to the defaults).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for ignored in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(ignored, signal.SIG_IGN)
    from shmguard.torch.tuning import _child

    sys.argv = [_child.__file__, *cmd[3:]]
    code = 0
    try:
        _child.main(cmd[3:])
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
                stream.flush()
    if code < 0:  # as Python does: die by the signal, so the parent sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _helper(request: dict[str, Any], fds: list[int], sock: socket.socket) -> NoReturn:
    """The forked sandbox helper: this trial's descriptors and environment, then
    :func:`shmguard.measure.launch.run_helper` with :func:`run_child` instead of ``execvp``."""
    from shmguard.measure import launch

    try:
        sock.close()
        signal.pthread_sigmask(signal.SIG_BLOCK, launch.HELPER_SIGNALS)
        for sig in launch.HELPER_FORWARD:
            signal.signal(sig, signal.SIG_DFL)
        status, gate, out, err = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR is the trial's now
        spec = dict(request["spec"], status_fd=status, gate_fd=gate, parent_pid=os.getppid())
        launch.run_helper(spec, run_child)
    finally:
        os._exit(launch.HELPER_EXIT_SETUP)


def _shm_held() -> list[str]:
    """/dev/shm files this process maps or holds open."""
    held = set()
    try:
        with open("/proc/self/maps") as fh:
            held |= {line.split(None, 5)[-1].strip() for line in fh if " /dev/shm/" in line}
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                held.add(target)
    except OSError:
        pass
    return sorted(held)


def _tasks() -> int:
    """The threads of this process, native ones included (``/proc/self/task``, proc(5))."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _anon() -> int:
    """Anonymous resident bytes of this process (``RssAnon``, proc(5)), 0 when unknown."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _serve(sock: socket.socket) -> None:
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MESSAGE, 4)
        except OSError:
            return
        if not msg:
            return
        pid = os.fork()
        if pid == 0:
            _helper(json.loads(msg), list(fds), sock)
        for fd in fds:
            os.close(fd)
        _send(sock, pid=pid)
        _, status = os.waitpid(pid, 0)
        _send(sock, exit=os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    """Import, say ready, serve (see the module docstring)."""
    sock = socket.socket(fileno=int(argv[0]))
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(argv[2]):  # the parent died before the death signal was armed
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The point: every trial forked from here has these (with what _child imports late).
    import torch.utils.data  # noqa: F401

    from shmguard.measure import launch  # noqa: F401 (and the helper's code)
    from shmguard.torch import sizing  # noqa: F401
    from shmguard.torch.tuning import _child  # noqa: F401

    error = ""
    tasks = _tasks()
    try:
        importlib.import_module(argv[1].partition(":")[0])
    except BaseException as err:  # each trial imports it again and reports it
        error = f"{type(err).__name__}: {err}".splitlines()[0]
    # What the import may have changed that serving needs: SIGCHLD ignored would have the
    # kernel reap the helpers, so that waitpid fails (ECHILD) and no trial ever ends; Ctrl-C
    # is the trial's and shmguard's (see the module docstring).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdout.flush()  # nothing buffered here may reach a trial's output
    sys.stderr.flush()
    _send(
        sock,
        ready=True,
        # Python's threads, or the native ones the import started (an OpenMP pool that a
        # parallel torch operation at import starts: a trial forked after it hangs at its
        # first parallel operation, as GNU libgomp's threads are not forked with it)
        threads=1 + max(threading.active_count() - 1, _tasks() - tasks),
        shm=_shm_held(),
        anon=_anon(),
        imported=not error,
        error=error,
    )
    _serve(sock)


if __name__ == "__main__":
    main(sys.argv[1:])

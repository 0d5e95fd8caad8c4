"""The sandbox helper process: namespaces, a private tmpfs /dev/shm, cgroups, an init, teardown.

Run by :class:`shmguard.measure.sandbox.Sandbox` as ``python -I -S _nsinit.py SPEC_JSON``; it
imports only the standard library so it starts in a few milliseconds and cannot be broken by
the user's environment. Two processes result:

* the **outer** one (this process, still in the caller's PID namespace): creates the child
  cgroups, ``unshare(2)``\\ s a mount namespace (plus a user namespace when not root), makes
  every mount private, mounts the tmpfs on /dev/shm, then forks the inner one. It forwards
  signals to it, and when it is gone reads the cgroups' peak memory, removes the cgroups and
  exits with the inner one's status. ``PR_SET_PDEATHSIG`` makes it tear everything down when
  its parent (shmguard) dies, even by SIGKILL.
* the **inner** one is PID 1 of a new PID namespace. It mounts a fresh /proc (best effort),
  forks the command, forwards signals to it (not the ones a terminal already delivered to the
  whole foreground process group), reaps orphans, and exits with the command's status, or
  ``128+N`` when a signal killed it. When PID 1 exits the kernel kills every other process of
  the namespace, so nothing the command forked outlives it; the mount namespace, and with it
  the tmpfs, goes away with its last process.

When the spec has a ``gate_fd``, the command is executed only once the parent writes one
byte ``g`` to it (the parent starts its sampler first); EOF means the parent gave up.

Events go to the parent as JSON lines on the ``status_fd`` pipe: ``ready`` (with the inner
PID as the parent sees it), ``error`` (setup failed: ``stage`` and ``message``), ``exec_error``,
``proc`` (whether /proc was remounted), ``exit``/``signal`` (how the command ended),
``cgroup`` (peak bytes per cgroup) and ``done``.

Sources: unshare(2), user_namespaces(7) (``setgroups`` must be ``deny`` before an unprivileged
``gid_map``), pid_namespaces(7) (PID 1 gets only signals it handles or blocks; its exit kills
the namespace), mount_namespaces(7) (``MS_REC|MS_PRIVATE``), prctl(2) ``PR_SET_PDEATHSIG``,
sigaction(2) (``SI_KERNEL`` for terminal-generated signals), cgroups(7).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

#: Runs the command in the inner process's forked child instead of ``execvp`` (a fork server's
#: hook, :mod:`shmguard.torch.tuning._zygote`): called with the argv, returns the exit code.
Runner = Callable[[list[str]], int]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
SI_KERNEL = 0x80

#: Exit status for "the sandbox itself could not be set up" (Docker uses 125 the same way).
EXIT_SETUP = 125

FORWARD = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
TTY_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
WAIT_SET = {*FORWARD, signal.SIGCHLD}


def hangup_ignored() -> bool:
    """This process was started with SIGHUP ignored (``nohup``): the command keeps it ignored
    and a SIGHUP shmguard gets is not forwarded, as an ``exec`` would have left it."""
    return signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def command_signals(nohup: bool) -> None:
    """The dispositions a command starts with: the defaults (Python ignores SIGPIPE and SIGXFSZ,
    and an ignored signal stays ignored across execve(2)), SIGHUP ignored under ``nohup``."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, *FORWARD):
        keep = nohup and sig == signal.SIGHUP
        signal.signal(sig, signal.SIG_IGN if keep else signal.SIG_DFL)


_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {fstype or source} on {target}",
    )


class Status:
    """JSON-lines events to the parent; a closed pipe (parent gone) is ignored."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}) + "\n"
        with contextlib.suppress(OSError):
            os.write(self.fd, line.encode())


def _exit_code(status: int) -> tuple[int, dict[str, Any]]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, {"signal": sig, "core": os.WCOREDUMP(status)}
    return os.WEXITSTATUS(status), {"code": os.WEXITSTATUS(status)}


def _userns_hint(err: OSError) -> str:
    facts = []
    for path in (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ):
        try:
            with open(path) as fh:
                facts.append(f"{path.rsplit('/', 1)[-1]}={fh.read().strip()}")
        except OSError:
            pass
    known = f" ({', '.join(facts)})" if facts else ""
    return (
        f"cannot create an unprivileged user namespace: unshare(CLONE_NEWUSER): "
        f"{os.strerror(err.errno or 0)}{known}; the kernel, a sysctl, AppArmor or a seccomp "
        "profile forbids it. Run shmguard as root (sudo), or run the job in a container with "
        "--shm-size instead"
    )


# ----------------------------------------------------------------------------- cgroups


def _make_cgroups(spec: list[dict[str, Any]], status: Status) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    for cg in spec:
        try:
            os.mkdir(cg["dir"])
            made.append(cg)
            for name, value in cg["writes"]:
                with open(os.path.join(cg["dir"], name), "w") as fh:
                    fh.write(value)
        except OSError as err:
            _remove_cgroups(made)
            status.send(
                "error",
                stage="cgroup",
                message=f"{cg['controller']} cgroup {cg['dir']}: {err.strerror or err}",
            )
            os._exit(EXIT_SETUP)
    return made


def _join_cgroups(spec: list[dict[str, Any]]) -> None:
    for cg in spec:
        with open(os.path.join(cg["dir"], cg["procs"]), "w") as fh:
            fh.write("0")


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_oom_kills(path: str) -> int | None:
    """The ``oom_kill N`` counter of a memory cgroup (v1 memory.oom_control, v2
    memory.events), or None when the kernel does not report it."""
    try:
        with open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def _remove_cgroups(made: list[dict[str, Any]]) -> list[str]:
    left = []
    for cg in reversed(made):
        for _ in range(200):  # tasks may take a moment to leave after SIGKILL
            try:
                os.rmdir(cg["dir"])
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY:
                    left.append(f"{cg['dir']}: {err.strerror}")
                    break
                time.sleep(0.01)
        else:
            left.append(f"{cg['dir']}: still busy")
    return left


# ------------------------------------------------------------------------------- inner


def _exec_message(prog: str, err: OSError) -> str:
    """``prog: strerror``; for a script whose ``#!`` interpreter is missing, say so as bash
    does (``prog: /bin/interp: bad interpreter: No such file or directory``): execve(2) gives
    ENOENT for both cases."""
    message = f"{prog}: {err.strerror}"
    if err.errno != errno.ENOENT:
        return message
    dirs = [""] if "/" in prog else os.environ.get("PATH", os.defpath).split(os.pathsep)
    for d in dirs:
        path = os.path.join(d, prog) if d else prog
        try:
            with open(path, "rb") as fh:
                head = fh.readline(256)
        except OSError:
            continue
        if head.startswith(b"#!"):
            interp = head[2:].split()
            if interp:
                name = interp[0].decode(errors="replace")
                return f"{prog}: {name}: bad interpreter: {err.strerror}"
        return message
    return message


def _inner(spec: dict[str, Any], status: Status, alive_r: int, run: Runner | None) -> None:
    """PID 1 of the new PID namespace."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    readable, _, _ = select.select([alive_r], [], [], 0)
    if readable:  # EOF: the outer process died before PDEATHSIG was armed
        os._exit(EXIT_SETUP)
    if spec.get("mount_proc", True):
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
            status.send("proc", ok=True)
        except OSError as err:
            status.send("proc", ok=False, reason=str(err.strerror))
    cmd = spec["command"]
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_r)
            os.set_inheritable(status.fd, False)
            _join_cgroups(spec["cgroups"])
            gate = spec.get("gate_fd")
            if gate is not None:
                # Wait until the parent's sampler has taken its first poll: a command that
                # allocates and frees in its first milliseconds would otherwise go unseen.
                # EOF without the byte means the parent is gone: do not run the command.
                if os.read(gate, 1) != b"g":
                    os._exit(EXIT_SETUP)
                os.close(gate)
            command_signals(bool(spec.get("nohup")))
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            if run is not None:
                os.close(status.fd)  # as exec would (not inheritable)
                os._exit(run(cmd))
            os.execvp(cmd[0], cmd)
        except OSError as err:
            code = 127 if err.errno == errno.ENOENT else 126
            status.send(
                "exec_error",
                errno=err.errno,
                message=_exec_message(cmd[0], err),
                code=code,
            )
            os._exit(code)
        os._exit(127)  # pragma: no cover - execvp does not return
    while True:
        info = signal.sigwaitinfo(WAIT_SET)
        sig: int = info.si_signo
        if sig == signal.SIGCHLD:
            while True:
                try:
                    done, st = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if done == 0:
                    break
                if done == pid:
                    code, fields = _exit_code(st)
                    status.send("signal" if "signal" in fields else "exit", **fields)
                    os._exit(code)
            continue
        if sig in TTY_SIGNALS and info.si_code == SI_KERNEL:
            continue  # the terminal already sent it to the command's process group
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


# ------------------------------------------------------------------------------- outer


def main(argv: list[str], run: Runner | None = None) -> None:
    """Set up the sandbox described by ``argv[1]`` (JSON) and run its command; never returns.
    ``run``: see :data:`Runner` (None: ``execvp`` the command, as a script always does)."""
    spec = json.loads(argv[1])
    status = Status(spec["status_fd"])
    parent = spec["parent_pid"]
    signal.pthread_sigmask(signal.SIG_BLOCK, WAIT_SET)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(EXIT_SETUP)

    made = _make_cgroups(spec["cgroups"], status)

    def fail(stage: str, message: str) -> None:
        _remove_cgroups(made)
        status.send("error", stage=stage, message=message)
        os._exit(EXIT_SETUP)

    uid, gid = os.geteuid(), os.getegid()
    userns = uid != 0
    flags = CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWUSER if userns else 0)
    if _libc.unshare(flags) != 0:
        err = OSError(ctypes.get_errno(), "unshare")
        if userns:
            fail("userns", _userns_hint(err))
        fail("unshare", f"unshare(CLONE_NEWNS|CLONE_NEWPID): {os.strerror(err.errno or 0)}")
    if userns:
        try:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as fh:
                    fh.write(text)
        except OSError as err:
            fail("userns", f"writing /proc/self/{name}: {err.strerror}")
    try:
        _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        if not os.path.isdir("/dev/shm"):
            os.mkdir("/dev/shm", 0o1777)
        _mount(
            "tmpfs",
            "/dev/shm",
            "tmpfs",
            MS_NOSUID | MS_NODEV,
            f"size={spec['shm_size']},mode=1777",
        )
    except OSError as err:
        fail("mount", str(err.strerror))

    alive_r, alive_w = os.pipe()
    inner = os.fork()
    if inner == 0:
        os.close(alive_w)
        try:
            _inner(spec, status, alive_r, run)
        finally:
            os._exit(EXIT_SETUP)
    os.close(alive_r)
    status.send("ready", init_pid=inner, userns=userns)

    result = EXIT_SETUP
    while True:
        info = signal.sigwaitinfo(WAIT_SET)
        sig: int = info.si_signo
        if sig == signal.SIGCHLD:
            try:
                done, st = os.waitpid(inner, os.WNOHANG)
            except ChildProcessError:
                break
            if done == inner:
                result, _fields = _exit_code(st)
                break
            continue
        if os.getppid() != parent:  # PDEATHSIG: shmguard is gone, take everything down
            os.kill(inner, signal.SIGKILL)
            continue
        if sig in TTY_SIGNALS and info.si_code == SI_KERNEL:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(inner, sig)
    peaks = {}
    oom_kills = None
    for cg in made:
        if cg.get("peak"):
            peaks[cg["controller"]] = _read_int(os.path.join(cg["dir"], cg["peak"]))
        if cg.get("events"):
            oom_kills = _read_oom_kills(os.path.join(cg["dir"], cg["events"]))
    left = _remove_cgroups(made)
    if spec.get("tmpdir"):
        # shmguard removes it too; this covers shmguard having been killed (PDEATHSIG).
        shutil.rmtree(spec["tmpdir"], ignore_errors=True)
    status.send("cgroup", peaks=peaks, left=left, oom_kills=oom_kills)
    status.send("done", status=result)
    os._exit(result)


if __name__ == "__main__":
    main(sys.argv)

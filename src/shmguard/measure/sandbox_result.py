"""What a sandboxed run is given and what it gives back (:mod:`shmguard.measure.sandbox`)."""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shmguard.measure._nsinit import EXIT_SETUP
from shmguard.measure.cgroups import CgroupPlan
from shmguard.measure.launch import Launcher
from shmguard.model.fact import Fact

#: Bytes of each output stream kept for classification.
TAIL_BYTES = 256 * 1024


class SandboxError(Exception):
    """The sandbox could not be set up. ``str(err)`` is one line saying what is missing."""


@dataclass(frozen=True)
class SandboxSpec:
    """What to run and under which limits.

    Attributes:
        command: argv of the command (looked up on PATH like a shell does).
        shm_size: bytes of the private tmpfs mounted on /dev/shm (> 0; the kernel rounds up to
            whole pages).
        memory_limit: bytes of a real memory cgroup limit, or None.
        cpus: CPU quota in CPUs (CFS bandwidth), or None.
        account_memory: create a memory cgroup even without a limit, to read its peak.
        mount_proc: mount a fresh /proc inside (best effort; the host's stays otherwise).
        env: environment of the command; None inherits ours.
        launcher: starts the helper process (:mod:`shmguard.measure.launch`); None: a fresh
            ``python -I -S _nsinit.py`` child of shmguard.
    """

    command: tuple[str, ...]
    shm_size: int
    memory_limit: int | None = None
    cpus: float | None = None
    account_memory: bool = False
    mount_proc: bool = True
    env: Mapping[str, str] | None = None
    launcher: Launcher | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed command ended.

    Attributes:
        exit_status: the shell-convention status: the command's exit code, ``128+N`` when
            signal N killed it, 127/126 when it could not be executed.
        exit_code: the exit code when it exited normally, else None.
        signal: the number of the signal that killed it, else None.
        signal_name: ``SIGBUS`` and the like, else None.
        stopped_by: why shmguard stopped it (``timeout``, ``hang``, a signal name that was not
            obeyed in time), else None.
        exec_error: ``"<cmd>: No such file or directory"`` when it could not be started.
        memory_peak: peak bytes of the sandbox's memory cgroup (tmpfs pages included), or
            unknown with the reason.
        proc_remounted: whether the command saw a /proc of its own PID namespace.
        user_namespace: whether an unprivileged user namespace was used.
        wall_time: seconds from start to the end of teardown.
        leftovers: cgroup directories that could not be removed (should be empty).
        stdout_tail: the last :data:`TAIL_BYTES` of stdout (only when output was piped).
        stderr_tail: the same for stderr.
        oom_kills: processes the memory cgroup's OOM killer killed (``oom_kill`` of
            memory.oom_control / memory.events), or None when unknown (no memory cgroup, or
            a kernel before 4.13).
        interrupted: the name of a SIGINT/SIGTERM/SIGHUP/SIGQUIT that shmguard received
            while waiting (from a terminal or sent to it), else None. Callers that run several
            sandboxes (probe, demo) stop there instead of counting the run as a failure.
    """

    exit_status: int
    exit_code: int | None
    signal: int | None
    signal_name: str | None
    stopped_by: str | None
    exec_error: str | None
    memory_peak: Fact[int]
    proc_remounted: bool
    user_namespace: bool
    wall_time: float
    leftovers: tuple[str, ...] = ()
    stdout_tail: bytes = field(default=b"", repr=False)
    stderr_tail: bytes = field(default=b"", repr=False)
    interrupted: str | None = None
    oom_kills: int | None = None


class RunInterrupted(Exception):
    """The user interrupted a series of sandboxed runs (Ctrl-C, SIGTERM to shmguard).

    ``str(err)`` names the signal; ``err.signal_name`` is its name (``SIGINT``).
    """

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}; the sandbox was torn down")
        self.signal_name = signal_name


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class Tail:
    """Keeps the last ``limit`` bytes of a stream."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit * 2:
            del self.data[: -self.limit]

    def value(self) -> bytes:
        return bytes(self.data[-self.limit :])


def build_result(
    events: list[dict[str, Any]],
    plan: CgroupPlan,
    returncode: int | None,
    *,
    started: float,
    stopped_by: str | None,
    interrupted: str | None,
    stdout_tail: bytes,
    stderr_tail: bytes,
) -> SandboxResult:
    """The :class:`SandboxResult` of a run from the helper's events and its exit status.

    Args:
        events: the helper's status events (``exit``, ``signal``, ``exec_error``, ``cgroup``,
            ``proc``, ``ready``), in the order read.
        plan: the run's cgroup plan (why a memory peak is unknown).
        returncode: the helper's own exit status (negative: killed by that signal).
        started: ``time.monotonic()`` at the start, for the wall time.
        stopped_by, interrupted, stdout_tail, stderr_tail: as in :class:`SandboxResult`.
    """
    ev = {e["event"]: e for e in events}
    status = returncode
    code: int | None = None
    sig: int | None = None
    if "exit" in ev:
        code = int(ev["exit"]["code"])
        status = code
    elif "signal" in ev:
        sig = int(ev["signal"]["signal"])
        status = 128 + sig
    elif status is not None and status > 128 and status != EXIT_SETUP:
        sig = status - 128
    elif status is not None and status < 0:
        sig = -status
        status = 128 + sig
    else:
        code = status
    exec_error = ev["exec_error"]["message"] if "exec_error" in ev else None
    peaks = ev.get("cgroup", {}).get("peaks", {})
    memory_peak: Fact[int]
    if "memory" in plan.unavailable:
        memory_peak = Fact.unknown(plan.unavailable["memory"])
    elif plan.get("memory") is None:
        memory_peak = Fact.unknown("no memory cgroup was asked for")
    elif peaks.get("memory") is None:
        cg = plan.get("memory")
        memory_peak = Fact.unknown(
            f"{cg.dir if cg else 'cgroup'}: no peak counter (memory.peak needs Linux 5.19+)"
        )
    else:
        memory_peak = Fact.known(int(peaks["memory"]))
    return SandboxResult(
        exit_status=status if status is not None else EXIT_SETUP,
        exit_code=code,
        signal=sig,
        signal_name=signame(sig) if sig else None,
        stopped_by=stopped_by,
        exec_error=exec_error,
        memory_peak=memory_peak,
        proc_remounted=bool(ev.get("proc", {}).get("ok", False)),
        user_namespace=bool(ev.get("ready", {}).get("userns", False)),
        wall_time=time.monotonic() - started,
        leftovers=tuple(ev.get("cgroup", {}).get("left", ())),
        stdout_tail=stdout_tail,
        stderr_tail=stderr_tail,
        interrupted=interrupted,
        oom_kills=ev.get("cgroup", {}).get("oom_kills"),
    )

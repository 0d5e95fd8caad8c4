"""How a measured or probed run ended, and why: exit status, signals, output text, hangs.

The output patterns and what they mean come from torch_shm.md section 5 (PyTorch 2.13 CPU,
reproduced on this machine): the worker error text of the default ``posix_fallocate`` path,
the feeder-thread traceback that precedes a silent hang, the SIGBUS path of older torch (or a
filesystem without fallocate), the memcg OOM kill, and ``DataLoader(timeout=...)``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from shmguard.measure.sampler import ShmSampler


class Outcome(str, enum.Enum):
    """The class of a run's end. ``ok`` is the only passing one."""

    OK = "ok"
    SHM_EXHAUSTED = "shm-exhausted"
    SIGBUS = "sigbus"
    HANG = "hang"
    TIMEOUT = "timeout"
    OOM_KILLED = "oom-killed"
    SIGNALED = "signaled"
    FAILED = "failed"
    NOT_STARTED = "not-started"

    @property
    def shm_related(self) -> bool:
        """True for the outcomes that mean "/dev/shm was too small"."""
        return self in (Outcome.SHM_EXHAUSTED, Outcome.SIGBUS, Outcome.HANG)


@dataclass(frozen=True)
class Pattern:
    """An output line pattern and what it shows (``kind`` is a key of :data:`PATTERNS`)."""

    kind: str
    regex: re.Pattern[str]


#: Output evidence. Sources: torch_shm.md section 5 and its failures/S*.txt transcripts.
PATTERNS = (
    Pattern("shm-alloc", re.compile(r"unable to allocate shared memory\(shm\)")),
    Pattern("shm-alloc", re.compile(r"unable to write to file </torch_")),
    Pattern("shm-alloc", re.compile(r"unable to open shared memory object")),
    Pattern("feeder", re.compile(r"in _feed\b|reduce_storage")),
    Pattern("sigbus", re.compile(r"killed by signal: Bus error")),
    Pattern("sigbus", re.compile(r"insufficient shared memory \(shm\)")),
    Pattern("sigbus", re.compile(r"out of shared memory")),
    Pattern("oom", re.compile(r"killed by signal: Killed")),
    Pattern("timeout", re.compile(r"DataLoader timed out after \d+")),
    Pattern(
        "worker-exit", re.compile(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly")
    ),
    Pattern("nospace", re.compile(r"No space left on device")),
)


@dataclass(frozen=True)
class Cause:
    """Why a run ended.

    Attributes:
        outcome: the class.
        summary: one plain sentence.
        evidence: the output lines (at most 5, stripped, NUL bytes removed) and facts used.
    """

    outcome: Outcome
    summary: str
    evidence: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when the run succeeded."""
        return self.outcome is Outcome.OK


def scan_output(text: str) -> dict[str, list[str]]:
    """Lines of ``text`` matching each pattern kind, in order (``{kind: [line, ...]}``)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        for pat in PATTERNS:
            if pat.regex.search(line):
                found.setdefault(pat.kind, []).append(line.replace("\x00", "").strip()[:300])
                break
    return found


def classify(
    exit_status: int,
    signal_name: str | None,
    stopped_by: str | None,
    output: str,
    *,
    shm_full: bool = False,
    memory_limited: bool = False,
    exec_error: str | None = None,
    oom_kills: int | None = None,
    strict: bool = False,
) -> Cause:
    """Classify a run's end.

    Args:
        exit_status: shell-convention status (``128+N`` for signal N).
        signal_name: ``SIGBUS`` etc. when a signal ended the command.
        stopped_by: ``hang``/``timeout``/other when shmguard stopped it.
        output: the command's stdout+stderr tail, decoded.
        shm_full: whether /dev/shm was (nearly) full at the end or the peak.
        memory_limited: whether a memory cgroup limit was set (SIGKILL then suggests OOM).
        exec_error: the exec failure text when the command never ran.
        oom_kills: processes the memory cgroup's OOM killer killed (None: unknown).
        strict: an exit 0 whose output reports a failed allocation is a failure even when
            /dev/shm did not look full (tmpfs refuses a ``fallocate`` larger than itself up
            front, so nothing fills). probe sets it when its measuring run printed no such line.

    Returns:
        a :class:`Cause`.
    """
    hits = scan_output(output)

    def ev(*kinds: str) -> tuple[str, ...]:
        lines: list[str] = []
        for k in kinds:
            lines += hits.get(k, [])
        return tuple(dict.fromkeys(lines))[:5]

    if exec_error:
        return Cause(Outcome.NOT_STARTED, f"the command could not be started: {exec_error}")
    if stopped_by == "hang":
        why = (
            " (a DataLoader worker failed to allocate in its feeder thread, the batch was "
            "dropped and the main process waits for it forever)"
            if "feeder" in hits
            else ""
        )
        return Cause(
            Outcome.HANG,
            f"the job hung: /dev/shm was full and nothing progressed{why}",
            (*ev("feeder", "shm-alloc", "nospace"), "/dev/shm full, no output, no CPU use"),
        )
    if stopped_by == "timeout":
        extra = " while /dev/shm was full" if shm_full else ""
        return Cause(
            Outcome.HANG if shm_full else Outcome.TIMEOUT,
            f"the job did not finish in time{extra}",
            ev("feeder", "shm-alloc"),
        )
    if exit_status == 0:
        if (shm_full or strict) and any(k in hits for k in ALLOC_FAILURE_KINDS):
            # A script that ignores a failed write (`cmd > /dev/shm/x; echo done`) or a job
            # that catches the error still exits 0: with /dev/shm full and the error in its
            # output, the size was too small all the same (probe must not call it a pass).
            return Cause(
                Outcome.SHM_EXHAUSTED,
                "the command exited 0, but /dev/shm filled up and its output reports a failed "
                "shared memory allocation",
                ev("shm-alloc", "sigbus", "nospace"),
            )
        return Cause(Outcome.OK, "the command finished successfully")
    if oom_kills:
        return Cause(
            Outcome.OOM_KILLED,
            f"the memory cgroup's OOM killer killed {oom_kills} "
            f"process{'es' if oom_kills > 1 else ''} (tmpfs pages count against the memory "
            "limit)",
            (*ev("oom", "worker-exit"), f"memory cgroup: oom_kill {oom_kills}"),
        )
    if signal_name == "SIGBUS" or "sigbus" in hits:
        return Cause(
            Outcome.SIGBUS,
            "a process was killed by SIGBUS touching shared memory that /dev/shm could not "
            "back (out of shm)",
            (*ev("sigbus", "worker-exit"), f"exit status {exit_status}"),
        )
    if "shm-alloc" in hits:
        return Cause(
            Outcome.SHM_EXHAUSTED,
            "a DataLoader worker could not allocate shared memory: /dev/shm is full",
            ev("shm-alloc", "worker-exit"),
        )
    if "timeout" in hits and shm_full:
        return Cause(
            Outcome.HANG,
            "DataLoader(timeout=...) fired while /dev/shm was full: a batch was lost to a "
            "failed shm allocation",
            ev("timeout", "feeder"),
        )
    if "oom" in hits or (signal_name == "SIGKILL" and memory_limited):
        return Cause(
            Outcome.OOM_KILLED,
            "a process was SIGKILLed, most likely by the memory cgroup's OOM killer "
            "(tmpfs pages count against the memory limit)",
            ev("oom", "worker-exit"),
        )
    if "nospace" in hits and shm_full:
        return Cause(Outcome.SHM_EXHAUSTED, "/dev/shm ran out of space", ev("nospace"))
    if signal_name:
        return Cause(
            Outcome.SIGNALED, f"the command was killed by {signal_name}", ev("worker-exit")
        )
    return Cause(
        Outcome.FAILED,
        f"the command failed with exit status {exit_status}",
        ev("worker-exit", "timeout", "nospace"),
    )


#: Kinds of :data:`PATTERNS` that report a failed allocation (or ENOSPC somewhere).
ALLOC_FAILURE_KINDS = ("shm-alloc", "sigbus", "nospace")

#: Output that shows a shared memory allocation failed (the kinds of :data:`PATTERNS` that
#: mean it), matched on the live output by :class:`HangDetector`.
_ALLOC_FAILED = re.compile(
    "|".join(p.regex.pattern for p in PATTERNS if p.kind in ("shm-alloc", "feeder", "sigbus"))
    + r"|No space left on device"
)
#: Bytes of the previous output chunk kept so a message split across two chunks still matches.
_CARRY = 256
_PAGE = 4096


class HangDetector:
    """A ``stop_check`` for :meth:`Sandbox.wait`: "hang" when /dev/shm is full and nothing
    progresses for ``after`` seconds.

    Full means: no free page left now, or free space (now or at the peak) below ``full_margin``
    bytes (give the largest single allocation seen, about one batch) or 2% of the size **and**
    the output has shown a failed allocation (``No space left on device``, ``unable to allocate
    shared memory(shm)``, a feeder-thread traceback; a failed allocation frees its partial
    pages, so a hung job can sit up to one batch below the limit). Without that evidence, a job
    that merely holds most of its /dev/shm and idles (a ``fallocate`` then a sleep, a slow
    step) is not a hang: calling it one made probe report sizes above the real minimum. No
    progress means: used bytes unchanged, no output, and the tree's CPU time grew by less than
    5% of one core over the window.

    Args:
        sampler: the running sampler (its slow loop must be on for the CPU criterion).
        after: seconds without progress before calling it a hang.
        full_margin: bytes; free space below this counts as full.
        clock: time source (tests).
    """

    def __init__(
        self,
        sampler: ShmSampler,
        after: float = 5.0,
        full_margin: int = 0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.sampler = sampler
        self.after = after
        self.full_margin = full_margin
        self.clock = clock or time.monotonic
        self.last_output = self.clock()
        self._cpu_mark: tuple[float, float] | None = None
        self.alloc_failed = False
        self._carry = ""
        self._pending = False

    def saw_output(self, _stream: str = "", chunk: bytes = b"") -> None:
        """Record output activity, and whether it reports a failed shm allocation (use as the
        sandbox's ``on_output``)."""
        self.last_output = self.clock()
        # Only scanned once /dev/shm came near its limit (a failed allocation happens there),
        # so a job printing gigabytes with plenty of room costs nothing here. The last bytes are
        # kept unscanned otherwise: the error line can arrive before the sampler has seen the
        # allocation that filled /dev/shm, and :meth:`full` scans them once it has.
        if chunk and not self.alloc_failed:
            if self._near_full():
                text = self._carry + chunk.decode("utf-8", "replace")
                self.alloc_failed = _ALLOC_FAILED.search(text) is not None
                self._carry, self._pending = text[-_CARRY:], False
            else:
                tail = chunk[-_CARRY:].decode("utf-8", "replace")
                self._carry, self._pending = (self._carry + tail)[-_CARRY:], True

    def _near_full(self) -> bool:
        total = self.sampler.total
        if total <= 0:
            return False
        margin = max(self.full_margin, total // 50)
        return total - self.sampler.used < margin or total - self.sampler.peak < margin

    def full(self) -> bool:
        """Whether /dev/shm counts as full (see the class docstring): no free page now, or near
        the limit (now or at its peak) with a failed allocation in the output."""
        total = self.sampler.total
        if total <= 0:
            return False
        if total - self.sampler.used < _PAGE:
            return True
        if not self._near_full():
            return False
        if self._pending and not self.alloc_failed:
            self.alloc_failed = _ALLOC_FAILED.search(self._carry) is not None
            self._pending = False
        return self.alloc_failed

    def __call__(self) -> str | None:
        now = self.clock()
        if not self.full():
            self._cpu_mark = None
            return None
        snap = self.sampler.latest_owner()
        cpu = snap.cpu_seconds if snap is not None else 0.0
        if self._cpu_mark is None:
            self._cpu_mark = (now, cpu)
            return None
        since, cpu0 = self._cpu_mark
        if cpu - cpu0 > 0.05 * (now - since) + 0.05:
            self._cpu_mark = (now, cpu)
            return None
        quiet = min(now - since, now - self.last_output, self.sampler.since_change())
        return "hang" if quiet >= self.after else None

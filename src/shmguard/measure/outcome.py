"""How a measured or probed run ended, and why: exit status, signals, output text, hangs.

The run's facts (exit status, signal, shmguard stopping it for a hang or a timeout, the memory
cgroup's OOM kill count, whether /dev/shm filled up) are measured here; what its output *says*
comes from the triage catalogue, through :func:`shmguard.triage.text.classify_text`, the
classifier behind ``explain``. So a run's :attr:`Cause.signature` is the cause ``explain``
reports first for the same text, and a wording is added once, as a signature file with its
samples (docs/signatures.md), for every command. The wordings measured with PyTorch 2.13 (the
``posix_fallocate`` error, the feeder-thread traceback before a silent hang, the SIGBUS path,
the memcg OOM kill, ``DataLoader(timeout=...)``) are in torch_shm.md section 5 and its
transcripts; tests/fixtures/measure/transcripts holds copies.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shmguard.triage.model import Result, Signature
from shmguard.triage.text import classify_text, signature_by_id


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


#: ``stopped_by`` of a run that was still going, with /dev/shm steady, when its trial time
#: was up (probe ``--trial-time``; :mod:`shmguard.measure.survive`): shmguard stopped it, and
#: it passes unless its output reports a failed shared memory allocation.
TRIAL_TIME = "trial-time"
#: The failure in a worker's queue feeder thread: the batch is dropped and the job hangs.
FEEDER_SIGNATURE = "dataloader-feeder-failure"


@dataclass(frozen=True)
class Cause:
    """Why a run ended.

    Attributes:
        outcome: the class.
        summary: one plain sentence.
        evidence: the output lines (at most 5, as ``explain`` shows them: control characters
            such as NUL removed, at most 400 characters) and facts used.
        signature: the id of the catalogue signature behind the outcome (docs/signatures.md):
            the cause ``explain`` reports first for the same output, or, when a fact of the
            run decided the outcome (a hang, an exit 0 with a failed allocation, the OOM
            counter, a SIGBUS), the first matched signature consistent with it. None when no
            such signature matched.
    """

    outcome: Outcome
    summary: str
    evidence: tuple[str, ...] = ()
    signature: str | None = None

    @property
    def passed(self) -> bool:
        """True when the run succeeded."""
        return self.outcome is Outcome.OK


def is_shm_failure(sig: Signature) -> bool:
    """Whether a signature reports a failed shm allocation: a cause marked ``shm`` in its file,
    not ``state_only`` (a full ``df`` row)."""
    return sig.role == "cause" and sig.shm and not sig.state_only


def _signature(sig_id: str | None) -> Signature | None:
    return signature_by_id().get(sig_id) if sig_id is not None else None


def is_shm(sig_id: str | None) -> bool:
    """The catalogue signature ``sig_id`` is marked ``shm``: its cause is a shared memory
    allocation that failed for want of /dev/shm space (PyTorch's DataLoader, a full /dev/shm,
    NCCL, Triton, Ray; docs/signatures.md). False for an id the built-in catalogue lacks."""
    sig = _signature(sig_id)
    return sig is not None and sig.shm


def is_sigbus(sig_id: str | None) -> bool:
    """The signature is marked ``sigbus``: the SIGBUS path, a page that tmpfs could not back
    was touched (outcome ``sigbus`` rather than ``shm-exhausted``)."""
    sig = _signature(sig_id)
    return sig is not None and sig.sigbus


def is_state_only(sig_id: str | None) -> bool:
    """The signature is marked ``state_only``: a /dev/shm *state* (a ``df`` row at 95% or
    more), not a failed allocation; like a low-confidence one, it decides only when the run's
    own sampler saw /dev/shm fill up."""
    sig = _signature(sig_id)
    return sig is not None and sig.state_only


def _needs_full(r: Result) -> bool:
    """The signature is a possibility that other evidence must decide (its own confidence is
    ``low``, e.g. a bare ENOSPC), or a state: the run's sampler seeing /dev/shm full decides."""
    sig = _signature(r.id)
    own = sig.confidence if sig is not None else r.base_confidence
    return own == "low" or is_state_only(r.id)


def shm_failures(results: Sequence[Result], *, states: bool = False) -> list[Result]:
    """The results (in rank order) that report a failed shared memory allocation or a SIGBUS on
    shared memory, leaving out those a non-shm cause explains (``No space left on device``
    explained by a full disk, ``disk-full``).

    Args:
        results: ranked results of :func:`~shmguard.triage.text.classify_text`.
        states: also keep the ``state_only`` ones (a ``df`` row showing /dev/shm full).
    """
    return [
        r
        for r in results
        if r.role == "cause"
        and is_shm(r.id)
        and (states or not is_state_only(r.id))
        and (r.explained_by is None or is_shm(r.explained_by))
    ]


def alloc_errors(results: Sequence[Result], limit: int = 5) -> tuple[str, ...]:
    """Evidence lines of :func:`shm_failures` (first ``limit``, duplicates removed): the
    output lines that make an exit 0 a failure under ``strict``."""
    return _lines(shm_failures(results))[:limit]


def _lines(results: Iterable[Result], limit: int = 5) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ev.text for r in results for ev in r.evidence))[:limit]


def _verdict(r: Result, shm_full: bool) -> Outcome | None:
    """What an unexplained cause says of the run, given whether /dev/shm filled up."""
    if is_sigbus(r.id):
        return Outcome.SIGBUS
    if is_shm(r.id):
        return Outcome.SHM_EXHAUSTED if shm_full or not _needs_full(r) else None
    if r.kind == "cgroup_oom":
        return Outcome.OOM_KILLED
    if r.kind == "worker_hang":
        return Outcome.HANG if shm_full else None
    return None


def classify(
    exit_status: int,
    signal_name: str | None,
    stopped_by: str | None,
    output: str | bytes,
    *,
    shm_full: bool = False,
    memory_limited: bool = False,
    exec_error: str | None = None,
    oom_kills: int | None = None,
    strict: bool = False,
    results: Sequence[Result] | None = None,
) -> Cause:
    """Classify a run's end.

    Facts first: the command never started, shmguard stopped it (hang, timeout, or the end of
    a trial time it survived: a pass), it exited 0, the OOM counter, a SIGBUS. Then the cause
    ``explain`` reports first for the output decides when it says something of the run: a
    shared memory failure (``shm-exhausted``; a low-confidence one such as a bare ``No space
    left on device`` only when /dev/shm filled up), the SIGBUS path, an OOM kill, a DataLoader
    timeout while /dev/shm was full (``hang``). Otherwise a SIGKILL under a memory limit is an
    OOM kill, another signal ``signaled``, the rest ``failed`` (a full disk, a GPU out of
    memory: not /dev/shm), each with that first cause as its :attr:`Cause.signature`.

    Args:
        exit_status: shell-convention status (``128+N`` for signal N).
        signal_name: ``SIGBUS`` etc. when a signal ended the command.
        stopped_by: ``hang``/``timeout``/:data:`TRIAL_TIME`/other when shmguard stopped it.
        output: the command's stdout+stderr tail (bytes as read, or decoded text).
        shm_full: whether /dev/shm was (nearly) full at the end or the peak.
        memory_limited: whether a memory cgroup limit was set (SIGKILL then suggests OOM).
        exec_error: the exec failure text when the command never ran.
        oom_kills: processes the memory cgroup's OOM killer killed (None: unknown).
        strict: an exit 0 whose output reports a failed allocation is a failure even when
            /dev/shm did not look full (tmpfs refuses a ``fallocate`` larger than itself up
            front, so nothing fills). probe sets it when its measuring run printed no such line.
        results: :func:`~shmguard.triage.text.classify_text` of ``output`` when the caller has
            it already (it is computed otherwise).

    Returns:
        a :class:`Cause`.

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
    """
    if exec_error:
        return Cause(Outcome.NOT_STARTED, f"the command could not be started: {exec_error}")
    res = tuple(results) if results is not None else classify_text(output)
    causes = [r for r in res if r.role == "cause" and r.explained_by is None]
    top = causes[0] if causes else None
    shm = shm_failures(res, states=True)
    shm_causes = [r for r in causes if is_shm(r.id)]
    exits = [r for r in res if r.kind == "worker_exit"]
    ooms = [r for r in res if r.kind == "cgroup_oom"]

    def sig(rs: Sequence[Result]) -> str | None:
        return rs[0].id if rs else None

    if stopped_by == "hang":
        feeder = any(r.id == FEEDER_SIGNATURE for r in res)
        why = (
            " (a DataLoader worker failed to allocate in its feeder thread, the batch was "
            "dropped and the main process waits for it forever)"
            if feeder
            else ""
        )
        return Cause(
            Outcome.HANG,
            f"the job hung: /dev/shm was full and nothing progressed{why}",
            (*_lines(shm), "/dev/shm full, no output, no CPU use"),
            sig(shm_causes),
        )
    if stopped_by == "timeout":
        if shm_full:
            return Cause(
                Outcome.HANG,
                "the job did not finish in time while /dev/shm was full",
                _lines(shm),
                sig(shm_causes),
            )
        return Cause(Outcome.TIMEOUT, "the job did not finish in time", _lines(causes), sig(causes))
    if stopped_by == TRIAL_TIME and not oom_kills:
        failures = shm_failures(res) if shm_full or strict else []
        if failures:
            return Cause(
                Outcome.SHM_EXHAUSTED,
                "the command was still running at the end of its trial time, but its output "
                f"reports a failed shared memory allocation: {failures[0].title}",
                _lines(failures),
                failures[0].id,
            )
        return Cause(
            Outcome.OK,
            "the command was still running with /dev/shm steady at the end of its trial "
            "time; shmguard stopped it",
        )
    if exit_status == 0:
        failures = shm_failures(res) if shm_full or strict else []
        if failures:
            # A script that ignores a failed write (`cmd > /dev/shm/x; echo done`) or a job
            # that catches the error still exits 0: with /dev/shm full (or probe's strict
            # trials) and the error in its output, the size was too small all the same.
            filled = " /dev/shm filled up and" if shm_full else ""
            return Cause(
                Outcome.SHM_EXHAUSTED,
                f"the command exited 0, but{filled} its output reports a failed shared memory "
                f"allocation: {failures[0].title}",
                _lines(failures),
                failures[0].id,
            )
        return Cause(Outcome.OK, "the command finished successfully")
    if oom_kills:
        return Cause(
            Outcome.OOM_KILLED,
            f"the memory cgroup's OOM killer killed {oom_kills} "
            f"process{'es' if oom_kills > 1 else ''} (tmpfs pages count against the memory "
            "limit)",
            (*_lines([*ooms, *exits]), f"memory cgroup: oom_kill {oom_kills}"),
            sig([r for r in causes if r.kind == "cgroup_oom"]),
        )
    if signal_name == "SIGBUS":
        bus = [r for r in causes if is_sigbus(r.id)] or shm_causes
        return Cause(
            Outcome.SIGBUS,
            "a process was killed by SIGBUS touching shared memory that /dev/shm could not "
            "back (out of shm)",
            (*_lines([*bus, *exits]), f"exit status {exit_status}"),
            sig(bus),
        )
    verdict = _verdict(top, shm_full) if top is not None else None
    if top is not None and verdict is not None:
        return _decided(verdict, top, res, exit_status)
    escalated = _ESCALATED.fullmatch(stopped_by or "")
    if signal_name == "SIGKILL" and escalated:
        return Cause(
            Outcome.SIGNALED,
            f"the command was killed by SIGKILL: shmguard sent it after the {escalated[1]} it "
            f"forwarded was ignored for {escalated[2]}",
            _lines(causes),
            sig(causes),
        )
    if signal_name == "SIGKILL" and memory_limited:
        return Cause(
            Outcome.OOM_KILLED,
            "a process was SIGKILLed, most likely by the memory cgroup's OOM killer "
            "(tmpfs pages count against the memory limit)",
            _lines(exits),
        )
    said = ""
    if top is not None:
        said = f"; the output shows: {top.title}"
        if is_shm(top.id):
            said += "; /dev/shm did not fill up in this run"
    if signal_name:
        return Cause(
            Outcome.SIGNALED,
            f"the command was killed by {signal_name}{said}",
            _lines(causes),
            sig(causes),
        )
    return Cause(
        Outcome.FAILED,
        f"the command failed with exit status {exit_status}{said}",
        _lines(causes),
        sig(causes),
    )


#: ``stopped_by`` of a sandbox that escalated a forwarded stop signal to SIGKILL
#: (:meth:`shmguard.measure.sandbox.Sandbox.wait`: ``SIGTERM ignored for 10s``).
_ESCALATED = re.compile(r"(SIG[A-Z]+) ignored for (\S+)")


def _decided(verdict: Outcome, r: Result, res: Sequence[Result], exit_status: int) -> Cause:
    """The :class:`Cause` when the output's cause ``r`` decided ``verdict``."""
    exits = [x for x in res if x.kind == "worker_exit"]
    if verdict is Outcome.SIGBUS:
        bus = [x for x in res if is_sigbus(x.id)]
        return Cause(
            verdict,
            r.title,
            (*_lines([r, *bus, *exits]), f"exit status {exit_status}"),
            r.id,
        )
    if verdict is Outcome.SHM_EXHAUSTED:
        full = "; /dev/shm filled up in this run" if _needs_full(r) else ""
        return Cause(verdict, f"{r.title}{full}", _lines([r, *shm_failures(res), *exits]), r.id)
    if verdict is Outcome.OOM_KILLED:
        ooms = [x for x in res if x.kind == "cgroup_oom"]
        return Cause(
            verdict,
            "a process was SIGKILLed, most likely by the memory cgroup's OOM killer "
            "(tmpfs pages count against the memory limit)",
            _lines([r, *ooms, *exits]),
            r.id,
        )
    feeder = [x for x in res if x.id == FEEDER_SIGNATURE]
    return Cause(
        verdict,
        "DataLoader(timeout=...) fired while /dev/shm was full: a batch was lost to a "
        "failed shm allocation",
        _lines([r, *feeder]),
        r.id,
    )

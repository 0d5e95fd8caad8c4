"""``shmguard run --watch``: run a command under the minimal init with the one sampler beside
it, stop it when it stalls on a full /dev/shm, and diagnose it when it fails.

The parts are the project's single ones: :class:`~shmguard.measure.supervise.Supervisor`
(signals, zombies, output), :class:`~shmguard.measure.sampler.ShmSampler` on the container's
own /dev/shm, :class:`~shmguard.measure.hang.HangDetector` feeding the one stall verdict
(:func:`shmguard.triage.stall.stall_verdict`), :func:`shmguard.measure.outcome.classify` for
how the run ended and :func:`shmguard.triage.explain_streams` (the classifier behind
``explain``) for the cause and its fix. The library never prints: the CLI renders a
:class:`StallReport` (at the stall, before the command is stopped) and the
:class:`WatchResult`.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from shmguard.estimate.decide import ShmEvidence, choose_shm
from shmguard.estimate.observed import observed_loader
from shmguard.estimate.policy import Policy, Sized
from shmguard.measure.hang import HangDetector
from shmguard.measure.outcome import Cause, classify
from shmguard.measure.sampler import ShmSampler, Timeline
from shmguard.measure.stall import StallObserver
from shmguard.measure.supervise import ChildExit, Supervisor
from shmguard.triage import explain_streams
from shmguard.triage.model import Diagnosis
from shmguard.triage.stall import StallVerdict, stall_verdict

_PID = re.compile(r"torch_(\d+)_")
#: statvfs period of a long-running watcher (the sampler's docstring: 10 ms or more).
WATCH_INTERVAL = 0.01
#: Seconds between owner scans (tree CPU time for the stall verdict; the torch blocks that
#: give the DataLoader model its workers and batch size, so short enough to see a loader that
#: fails within a second of its first batch; one scan of a 5-process tree takes about 1 ms).
OWNER_INTERVAL = 0.2
#: Default seconds of "/dev/shm full, failed allocations, no progress" that make a stall.
STALL_AFTER = 60.0
#: Exit status of a command shmguard stopped because it stalled (as timeout(1) does).
EXIT_STALLED = 124
#: The explain runtimes a detected runtime (``RuntimeFacts.name``) maps to.
_EXPLAIN_RUNTIMES = ("docker", "kubernetes", "podman", "slurm", "apptainer")


@dataclass(frozen=True)
class ShmState:
    """What the sampler saw of /dev/shm.

    Attributes:
        path: the watched directory.
        total: its size in bytes.
        used: bytes used at the moment of the report.
        peak: the highest used bytes seen.
        failed_blocks: new zero-block ``torch_*`` files (failed PyTorch allocations) seen by
            the stall detector.
    """

    path: str
    total: int
    used: int
    peak: int
    failed_blocks: int = 0

    @property
    def full(self) -> bool:
        """Less than 2% of the size (at least one page) was free at the peak."""
        return self.total > 0 and self.total - self.peak < max(self.total // 50, 4096)


@dataclass(frozen=True)
class StallReport:
    """The state at the moment the stall verdict fired, before the command is stopped.

    Attributes:
        verdict: the stall verdict and its evidence.
        shm: /dev/shm at that moment.
        diagnosis: the classifier's diagnosis of the output so far.
    """

    verdict: StallVerdict
    shm: ShmState
    diagnosis: Diagnosis


@dataclass(frozen=True)
class WatchResult:
    """How a watched command ended.

    Attributes:
        command: the argv.
        child: exit status, signal, exec error, interruption, ``stopped_by="hang"``.
        exit_status: what ``shmguard run --watch`` exits with: the command's status
            (``128+N`` for signal N), or :data:`EXIT_STALLED` when shmguard stopped it.
        shm: what the sampler saw, or None when /dev/shm could not be sampled.
        sampler_error: why /dev/shm could not be sampled, else None.
        timeline: the sampler's record, or None.
        cause: how the run ended and why (:func:`~shmguard.measure.outcome.classify`); None
            when it succeeded or could not be executed.
        diagnosis: the classifier's diagnosis of the output tail, or None (same cases).
        stall: the report made at the stall, or None.
        relayed: the streams that went through shmguard (``stdout``, ``stderr``); a terminal
            is inherited and not scanned.
    """

    command: tuple[str, ...]
    child: ChildExit
    exit_status: int
    shm: ShmState | None
    sampler_error: str | None
    timeline: Timeline | None
    cause: Cause | None
    diagnosis: Diagnosis | None
    stall: StallReport | None
    relayed: tuple[str, ...]

    @property
    def failed(self) -> bool:
        """The command failed, was killed, or was stopped for a stall."""
        return self.exit_status != 0


def explain_runtime(name: str) -> str | None:
    """The ``explain --runtime`` for a detected runtime name (``docker``, ``kubernetes``...),
    or None (``none``, ``unknown``: explain infers it from the log)."""
    return name if name in _EXPLAIN_RUNTIMES else None


def shm_mount_line(mounts: Path = Path("/proc/self/mounts"), target: str = "/dev/shm") -> bytes:
    """The mount-table line of the filesystem visible at ``target`` (``shm /dev/shm tmpfs
    rw,...,size=65536k 0 0``): given to the classifier beside the output, it tells it the
    /dev/shm size the job had (the catalogue's ``context-sizes`` reads it from a mount line).
    Of several mounts on one target the last is the one on top (proc(5): the file lists mounts
    in mount order). Empty when unreadable or when nothing is mounted there."""
    try:
        text = mounts.read_bytes()
    except OSError:
        return b""
    found = [
        line
        for line in text.splitlines()
        if len(line.split()) > 2 and line.split()[1] == target.encode()
    ]
    return found[-1] + b"\n" if found else b""


def model_size(
    creators: int, largest: int, peak: int, policy: Policy | None = None
) -> Sized | None:
    """The /dev/shm size for the DataLoader a watcher saw: ``creators`` workers making
    ``largest``-byte batches, ``peak`` bytes at most (a run that filled /dev/shm peaks at its
    size, so the model's peak says what it would have needed), through the sizing policy;
    None when no ``torch_*`` block was seen (then the classifier's own size stands). The size
    is the one decision's (:func:`~shmguard.estimate.decide.choose_shm`) with the model's
    peak as evidence."""
    seen = observed_loader(creators, largest, peak)
    if seen is None:
        return None
    need = seen.need()
    context = need.context.replace("the measuring run saw", "shmguard saw", 1)
    return choose_shm(ShmEvidence(model=replace(need, context=context)), policy)


def diagnose_output(
    stdout: bytes,
    stderr: bytes,
    mounts: bytes = b"",
    *,
    runtime: str | None = None,
    policy: Policy | None = None,
    shm_size: Sized | None = None,
) -> Diagnosis:
    """The classifier's diagnosis of a command's output tails and /dev/shm mount lines, as
    ``explain`` makes it for those three inputs (one incident): named ``stderr``, ``stdout``
    and ``/proc/self/mounts`` (each left out when empty). ``shm_size``: the size its fixes
    give instead of the catalogue's (:func:`model_size`).

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
    """
    named = [("stderr", stderr), ("stdout", stdout), ("/proc/self/mounts", mounts)]
    inputs = [(name, io.BytesIO(data)) for name, data in named if data]
    if not inputs:
        inputs = [("output", io.BytesIO(b""))]
    return explain_streams(inputs, runtime=runtime, policy=policy, shm_size=shm_size)


def watch_command(
    argv: Sequence[str],
    *,
    shm_path: str | Path = "/dev/shm",
    interval: float = WATCH_INTERVAL,
    stall_after: float = STALL_AFTER,
    stop_grace: float = 10.0,
    runtime: str | None = None,
    policy: Policy | None = None,
    on_stall: Callable[[StallReport], None] | None = None,
    owner_interval: float = OWNER_INTERVAL,
) -> WatchResult:
    """Run ``argv`` under :class:`Supervisor` with the sampler on ``shm_path``; call from the
    main thread (it waits for signals there).

    Args:
        argv: the command.
        shm_path: the /dev/shm to sample.
        interval: statvfs period in seconds.
        stall_after: seconds of no progress with /dev/shm full and an allocation failed before
            the command counts as stalled: ``on_stall`` is called, then the command gets
            SIGTERM and, ``stop_grace`` seconds later, SIGKILL with its whole tree.
        runtime: the ``explain`` runtime for the fix (:func:`explain_runtime`), None to infer.
        policy: the sizing policy of the fix.
        on_stall: receives the :class:`StallReport` before the command is stopped.
        owner_interval: seconds between owner scans.
    """
    sampler: ShmSampler | None = None
    detector: HangDetector | None = None
    sampler_error: str | None = None
    report: list[StallReport] = []

    def saw(stream: str, chunk: bytes) -> None:
        if detector is not None:
            detector.saw_output(stream, chunk)

    with Supervisor(list(argv), on_output=saw) as sup:
        sup.spawn()
        candidate = ShmSampler(
            shm_path, interval=interval, pids=sup.tree_pids, owner_interval=owner_interval
        )
        try:
            candidate.start()
            sampler = candidate
            detector = HangDetector(sampler, after=stall_after)
        except OSError as err:
            sampler_error = f"{shm_path}: {err.strerror or err}"

        def diagnose(out: bytes, err: bytes) -> Diagnosis:
            size = _loader_size(sampler, detector, policy)
            mounts = shm_mount_line()
            return diagnose_output(out, err, mounts, runtime=runtime, policy=policy, shm_size=size)

        def stalled() -> str | None:
            return detector() if detector is not None else None

        def stop(reason: str) -> None:
            assert sampler is not None and detector is not None
            out, err = sup.tails()
            # The observation the verdict fired on: the detector's quiet time was the least of
            # these and flat CPU, so this one is at least ``stall_after`` too.
            quiet = min(sampler.since_change(), time.monotonic() - detector.last_output)
            obs = detector.observe(quiet)
            r = StallReport(
                stall_verdict(obs, stall_after),
                _state(sampler, detector.failed_blocks),
                diagnose(out, err),
            )
            report.append(r)
            if on_stall is not None:
                on_stall(r)

        try:
            child = sup.wait(stalled, stop, stop_grace=stop_grace)
        finally:
            timeline = sampler.stop() if sampler is not None else None
        stdout, stderr = sup.tails()
        relayed = sup.relayed
    shm = None
    if sampler is not None and timeline is not None:
        failed = detector.failed_blocks if detector is not None else 0
        shm = ShmState(timeline.path, timeline.shm_total, sampler.used, timeline.peak, failed)
    stall = report[0] if report else None
    status = EXIT_STALLED if child.stopped_by == "hang" else child.exit_status
    cause: Cause | None = None
    diagnosis: Diagnosis | None = None
    if status != 0 and child.exec_error is None:
        diagnosis = stall.diagnosis if stall is not None else diagnose(stdout, stderr)
        full = shm is not None and (shm.full or _filled(timeline))
        cause = classify(
            child.exit_status,
            child.signal_name,
            child.stopped_by,
            stdout + b"\n" + stderr,
            shm_full=full,
            oom_kills=None,
            results=diagnosis.results,
        )
    return WatchResult(
        command=tuple(argv),
        child=child,
        exit_status=status,
        shm=shm,
        sampler_error=sampler_error,
        timeline=timeline,
        cause=cause,
        diagnosis=diagnosis,
        stall=stall,
        relayed=relayed,
    )


def _loader_size(
    sampler: ShmSampler | None, detector: HangDetector | None, policy: Policy | None
) -> Sized | None:
    """:func:`model_size` for what the owner scans saw, with the failed allocations' zero-block
    ``torch_*`` files added: their names carry the worker's pid and their size the bytes it
    asked for (a loader that fails within a scan interval leaves only those). Files already
    there when watching began are another run's and do not count."""
    if sampler is None:
        return None
    observer = detector.observer if detector is not None else StallObserver(sampler.path)
    creators, largest = sampler.torch_seen()
    failed = [(m.group(1), size) for name, size in observer.failed() if (m := _PID.match(name))]
    creators |= {pid for pid, _ in failed}
    largest = max([largest, *(size for _, size in failed)])
    return model_size(len(creators), largest, sampler.peak, policy)


def _state(sampler: ShmSampler, failed_blocks: int) -> ShmState:
    return ShmState(sampler.path, sampler.total, sampler.used, sampler.peak, failed_blocks)


def _filled(timeline: Timeline | None) -> bool:
    """Free space at the peak below the largest single step (about one batch): measure's
    test for "/dev/shm filled up"."""
    if timeline is None or timeline.shm_total <= 0:
        return False
    return timeline.shm_total - timeline.peak < timeline.max_step()

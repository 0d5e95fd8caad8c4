"""``measure``: run a command in a sandbox with a generous /dev/shm and record what it used."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from shmguard.estimate import Policy, Recommendation, recommend
from shmguard.estimate.observed import observed_loader
from shmguard.estimate.recommend import no_recommendation
from shmguard.measure.hang import HangDetector
from shmguard.measure.launch import Launcher
from shmguard.measure.outcome import TRIAL_TIME, Cause, Outcome, alloc_errors, classify
from shmguard.measure.sampler import OwnerSnapshot, ShmSampler, Timeline
from shmguard.measure.sandbox import Sandbox, SandboxError, SandboxSpec
from shmguard.measure.survive import STOP_GRACE, SurvivalCheck
from shmguard.model.fact import Fact
from shmguard.triage.text import classify_text
from shmguard.units import GiB, MiB, format_iec

#: statvfs interval for measure and probe: the extra-batch spikes last about 1 ms.
MEASURE_INTERVAL = 0.002
#: Lines of the command's stderr a result keeps (probe shows them when its measuring run
#: fails: it captures the command's output, so nothing else would show why).
STDERR_LINES = 10
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def tail_lines(data: bytes, limit: int = STDERR_LINES) -> tuple[str, ...]:
    """The last ``limit`` non-blank lines of ``data``: decoded (invalid UTF-8 replaced), a
    progress bar's carriage-return updates reduced to the last one, terminal escapes and NUL
    bytes removed, trailing blanks stripped, each line cut at 300 characters."""
    lines: list[str] = []
    for raw in data.decode("utf-8", "replace").split("\n"):
        line = _ANSI.sub("", raw.rstrip("\r").rsplit("\r", 1)[-1]).replace("\x00", "").rstrip()
        if line:
            lines.append(line[:300])
    return tuple(lines[-limit:]) if limit > 0 else ()


def generous_shm_size(root: Path = Path("/")) -> int:
    """Half of RAM (the kernel's default tmpfs size), at least 1 GiB, in whole MiB.

    tmpfs reserves nothing: pages exist only once written, so a large size costs nothing
    unless the job uses it. Reads ``root/proc/meminfo`` (``MemTotal`` in kB, proc(5)).
    """
    total = 0
    try:
        for line in (root / "proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        total = 0
    return max(GiB, total // 2 // MiB * MiB)


@dataclass(frozen=True)
class MeasureResult:
    """One measured run.

    Attributes:
        command: the argv run.
        shm_size: bytes of the sandbox's tmpfs.
        memory_limit: bytes of the memory limit applied, or None.
        cpus: CPU quota applied, or None.
        exit_status: shell-convention status of the command.
        signal: name of the signal that ended it, or None.
        stopped_by: ``hang``/``timeout``/... when shmguard stopped it, else None.
        cause: outcome class, plain summary and evidence.
        peak: highest /dev/shm used bytes (statvfs, includes unlinked-but-held files).
        peak_at: seconds after start when the peak was first seen.
        baseline: used bytes at the start.
        owners_at_peak: the owner snapshot taken nearest the peak, or None.
        rss_peak: highest RSS sum of the process tree (overcounts mapped shm).
        memory_peak: the memory cgroup's peak (includes tmpfs pages), or unknown.
        wall_time: seconds from start to the end of teardown.
        timeline: the sampler's record.
        recommendation: sizes to configure.
        interrupted: the signal shmguard received while waiting (Ctrl-C, SIGTERM), else None.
        alloc_errors: output lines reporting a failed shared memory allocation (at most 5, as
            :func:`~shmguard.measure.outcome.alloc_errors` picks them from the triage
            catalogue's results: not an ENOSPC on a named disk path), also when the command
            succeeded.
        stderr_tail: the last lines of the command's stderr (at most :data:`STDERR_LINES`, see
            :func:`tail_lines`); empty when it wrote none or its output was not piped
            (``output="inherit"``).
    """

    command: tuple[str, ...]
    shm_size: int
    memory_limit: int | None
    cpus: float | None
    exit_status: int
    signal: str | None
    stopped_by: str | None
    cause: Cause
    peak: int
    peak_at: float
    baseline: int
    owners_at_peak: OwnerSnapshot | None
    rss_peak: Fact[int]
    memory_peak: Fact[int]
    wall_time: float
    timeline: Timeline
    recommendation: Recommendation
    interrupted: str | None = None
    alloc_errors: tuple[str, ...] = ()
    stderr_tail: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when the command succeeded."""
        return self.cause.passed

    @property
    def survived(self) -> bool:
        """True when it passed by surviving its trial time (``run_for``) with /dev/shm steady:
        shmguard stopped it."""
        return self.passed and self.stopped_by == TRIAL_TIME


def passed_run_recommendation(
    timeline: Timeline,
    memory_peak: Fact[int],
    *,
    need: int | None = None,
    need_basis: str = "measured peak",
    headroom: float | None = None,
    policy: Policy | None = None,
) -> Recommendation:
    """The sizes to ship for a run that passed (``measure``, and ``probe`` with its minimum):
    the one size decision of ``need`` (default: the timeline's peak; ``need_basis`` names it)
    and, when the owner scans saw a DataLoader (``torch_*`` blocks), the model's peak for it
    (:func:`~shmguard.estimate.observed.observed_loader`, prefetch_factor 2 unless the peak
    says more): the larger gets the headroom (one run of a fast consumer can peak below the
    model). The memory limit is from ``memory_peak``, the cgroup's peak, less the shm pages.

    Raises:
        ValueError: for a negative or non-finite headroom.
    """
    seen = observed_loader(timeline.torch_creators, timeline.torch_largest, timeline.peak)
    return recommend(
        timeline.peak if need is None else need,
        need_basis,
        headroom=headroom,
        policy=policy,
        cgroup_peak=memory_peak,
        shm_peak=timeline.peak,
        non_shm_seen=_non_shm(timeline),
        model=seen.need() if seen is not None else None,
    )


def _non_shm(timeline: Timeline) -> int | None:
    vals = [o.memory_usage - o.shm_used for o in timeline.owners if o.memory_usage is not None]
    return max(vals) if vals else None


def failed_run_basis(
    cause: Cause,
    peak: int,
    memory_peak: Fact[int],
    *,
    memory_limit: int | None = None,
    interrupted: str | None = None,
) -> str:
    """Why a run that failed for a reason other than /dev/shm gets no shm size, and what to
    change instead (one sentence for the recommendation's basis).

    Args:
        cause: how the run ended (not passed, not shm-related).
        peak: bytes of /dev/shm the part that ran used (a lower bound of the need).
        memory_peak: the memory cgroup's peak bytes, or unknown.
        memory_limit: bytes of the memory limit the run had, or None.
        interrupted: the signal that interrupted shmguard, or None.
    """
    lower = (
        f"the {format_iec(peak)} /dev/shm peak of the part that ran is only a lower bound of "
        "its need"
    )
    if interrupted is not None:
        return (
            f"the run was interrupted ({interrupted}) before it finished, so its shm need is "
            f"unknown: {lower}; measure a whole run"
        )
    if cause.outcome is Outcome.OOM_KILLED:
        reached = format_iec(memory_peak.value) if memory_peak.value is not None else None
        if memory_limit is not None:
            raise_it = f"Raise --memory above {format_iec(memory_limit)}"
            if reached is not None and memory_peak.value != memory_limit:
                raise_it += f" (its memory cgroup reached {reached})"
        elif reached is not None:
            raise_it = f"Raise the container's memory limit above the {reached} it reached"
        else:
            raise_it = "Raise the container's memory limit"
        return (
            "the run was OOM-killed, not short of /dev/shm, so its shm need is unknown: "
            f"{lower}. {raise_it}, or lower the batch size or num_workers, then measure again"
        )
    if cause.outcome is Outcome.TIMEOUT:
        return (
            f"the run did not finish in time and /dev/shm was not full, so its shm need is "
            f"unknown: {lower}; measure again with a longer --timeout"
        )
    if cause.outcome is Outcome.NOT_STARTED:
        return "the command did not start; fix the command, then measure again"
    return (
        f"{cause.summary}, which is not about /dev/shm: fix the command first, then measure "
        f"again; {lower}"
    )


def measure_command(
    command: Sequence[str],
    *,
    shm_size: int | None = None,
    memory_limit: int | None = None,
    cpus: float | None = None,
    interval: float = MEASURE_INTERVAL,
    owner_interval: float = 0.1,
    headroom: float | None = None,
    policy: Policy | None = None,
    timeout: float | None = None,
    hang_after: float = 5.0,
    full_margin: int = 0,
    output: str = "tee",
    on_output: Callable[[str, bytes], None] | None = None,
    env: dict[str, str] | None = None,
    stdout_fd: int = 1,
    on_start: Callable[[Sandbox], None] | None = None,
    strict: bool = False,
    run_for: float | None = None,
    stop_grace: float = STOP_GRACE,
    launcher: Launcher | None = None,
) -> MeasureResult:
    """Run ``command`` in a sandbox and measure its /dev/shm use.

    Args:
        command: argv.
        shm_size: tmpfs size in bytes; default :func:`generous_shm_size`.
        memory_limit: bytes of memory limit, or None (a memory cgroup is still created, when
            permitted, to read the peak).
        cpus: CPU quota, or None.
        interval: statvfs period in seconds.
        owner_interval: owner attribution period in seconds.
        headroom: fraction added to the peak for the recommendation (default: the
            policy's).
        policy: the sizing policy (default :class:`~shmguard.estimate.Policy`).
        timeout: seconds before the run is killed, or None.
        hang_after: seconds of "shm full and no progress" before the run is called hung.
        full_margin: bytes of free space below which /dev/shm counts as full (default: 2%).
        output: ``tee`` (pass output through unchanged), ``capture`` or ``inherit``.
        on_output: extra callback for output chunks.
        env: environment for the command, None inherits.
        stdout_fd: where ``tee`` copies the command's stdout (2 when our stdout carries JSON).
        on_start: called with the running :class:`Sandbox` once sampling has begun (e.g. to
            attach another observer to ``box.shm_path``).
        strict: an exit 0 with a failed allocation in the output is a failure even when
            /dev/shm did not look full (probe's trials, when the measuring run printed none).
        run_for: for a command that never ends on its own: once it has run this many seconds
            with /dev/shm steady (:mod:`shmguard.measure.survive`) it is stopped (SIGTERM, then
            SIGKILL after ``stop_grace`` seconds) and passes, unless its output reports a
            failed shared memory allocation (``stopped_by`` is ``trial-time``).
        stop_grace: seconds between that SIGTERM and the SIGKILL.
        launcher: starts the sandbox's helper (:mod:`shmguard.measure.launch`; tune's fork
            server); None: a fresh one.

    Raises:
        SandboxError: the sandbox could not be set up (message names what is missing).
    """
    size = shm_size or generous_shm_size()
    spec = SandboxSpec(
        tuple(command),
        size,
        memory_limit=memory_limit,
        cpus=cpus,
        account_memory=True,
        env=env,
        launcher=launcher,
    )
    detector: HangDetector | None = None

    def relay(stream: str, chunk: bytes) -> None:
        if detector is not None:
            detector.saw_output(stream, chunk)
        if on_output is not None:
            on_output(stream, chunk)

    with Sandbox(spec, output=output, on_output=relay, stdout_fd=stdout_fd) as box:
        box.start(hold=True)  # the command runs only once the sampler has its first poll
        sampler = ShmSampler(
            box.shm_path,
            interval=interval,
            pids=box.tree_pids,
            owner_interval=owner_interval,
            usage_file=box.memory_usage_file,
            hold=True,
        )
        try:
            sampler.start()
        except OSError as err:
            box.kill("sampler")
            box.wait()
            raise SandboxError(f"cannot read {box.shm_path}: {err.strerror}") from None
        detector = HangDetector(sampler, after=hang_after, full_margin=full_margin)
        survival = SurvivalCheck(sampler, detector, run_for) if run_for else None

        def stop_check() -> str | None:
            assert detector is not None
            reason = detector()
            if reason is None and survival is not None and survival.due():
                box.stop(TRIAL_TIME, stop_grace)
            return reason

        try:
            if on_start is not None:
                on_start(box)
            box.release()
            if survival is not None:
                survival.begin()
            result = box.wait(timeout=timeout, stop_check=stop_check)
        finally:
            timeline = sampler.stop()
    tail = result.stdout_tail + b"\n" + result.stderr_tail
    # One pass of the triage catalogue over the output serves the cause and alloc_errors.
    results = classify_text(tail)
    full = timeline.shm_total > 0 and timeline.shm_total - timeline.peak < max(
        full_margin, timeline.max_step(), timeline.shm_total // 50
    )
    cause = classify(
        result.exit_status,
        result.signal_name,
        result.stopped_by,
        tail,
        shm_full=full,
        memory_limited=memory_limit is not None,
        oom_kills=result.oom_kills,
        exec_error=result.exec_error,
        strict=strict,
        results=results,
    )
    peak = timeline.peak
    if cause.passed:
        rec = passed_run_recommendation(
            timeline, result.memory_peak, headroom=headroom, policy=policy
        )
    elif cause.outcome.shm_related:
        rec = recommend(
            None,
            f"the run ran out of /dev/shm at {size} bytes, so its peak is only a lower bound; "
            "measure again with a larger --shm-size, or use `shmguard probe`",
            headroom=headroom,
            policy=policy,
        )
    else:
        # A run that did not finish says nothing of what the whole run needs, and a size
        # printed next to a failure that is not about /dev/shm reads as its fix.
        rec = no_recommendation(
            failed_run_basis(
                cause,
                peak,
                result.memory_peak,
                memory_limit=memory_limit,
                interrupted=result.interrupted,
            ),
            headroom,
            policy,
        )
    rss = timeline.rss_peak
    return MeasureResult(
        command=tuple(command),
        shm_size=size,
        memory_limit=memory_limit,
        cpus=cpus,
        exit_status=result.exit_status,
        signal=result.signal_name,
        stopped_by=result.stopped_by,
        cause=cause,
        peak=peak,
        peak_at=timeline.peak_t,
        baseline=timeline.baseline,
        owners_at_peak=timeline.owners_at_peak(),
        rss_peak=Fact.known(rss) if rss is not None else Fact.unknown("no process snapshot"),
        memory_peak=result.memory_peak,
        wall_time=result.wall_time,
        timeline=timeline,
        recommendation=rec,
        interrupted=result.interrupted,
        alloc_errors=alloc_errors(results),
        stderr_tail=tail_lines(result.stderr_tail),
    )

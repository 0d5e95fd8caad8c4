"""Run one tune trial: the user's DataLoader in a sandbox of the budget, measured.

Each trial is ``measure``'s run (:func:`shmguard.measure.run.measure_command`): a private
tmpfs /dev/shm of the rank's shm budget, a memory cgroup of its memory budget and a CPU quota,
the one sampler for the peak, the hang detector and stall verdict for a hang, and the one
failure classifier for why it failed. Inside, :mod:`shmguard.torch.tuning._child` builds the
loader and times it, in a process forked from tune's fork server (:mod:`.zygote`) when the
plan has one, else in a fresh Python. A configuration that exhausts /dev/shm, gets SIGBUS,
hangs, is OOM-killed or runs out of time is *infeasible* (it would fail in production the same
way), not slow.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from shmguard.estimate import LoaderSpec, padded_bytes, predict
from shmguard.measure.outcome import Outcome
from shmguard.measure.run import MeasureResult, measure_command
from shmguard.torch.tuning.model import Trial, TrialConfig
from shmguard.torch.tuning.zygote import Zygote

#: Outcomes that make a configuration infeasible under the budget.
INFEASIBLE = frozenset(
    {Outcome.SHM_EXHAUSTED, Outcome.SIGBUS, Outcome.HANG, Outcome.OOM_KILLED, Outcome.TIMEOUT}
)


class TuneInputError(ValueError):
    """The factory cannot be tuned (it cannot be imported, raises, returns no DataLoader, or
    fixes ``num_workers`` itself); ``str(err)`` is one line."""


@dataclass(frozen=True)
class TrialPlan:
    """How every trial runs.

    Attributes:
        loader: ``MODULE:FACTORY``.
        steps: timed batches.
        warmup: batches before timing starts (worker start-up included).
        step_time: seconds of simulated training per batch.
        shm: bytes of the trial's tmpfs.
        memory: bytes of the trial's memory limit, or None.
        cpus: the trial's CPU quota, or None.
        timeout: seconds before a trial is stopped (then infeasible: ``timeout``).
        hang_after: seconds of full /dev/shm and no progress that count as a hang.
        pythonpath: directories the trial imports from (the caller's ``sys.path``).
        zygote: the fork server the trials are forked from (:mod:`.zygote`), or None: each
            starts a fresh Python.
    """

    loader: str
    steps: int
    warmup: int
    step_time: float
    shm: int
    memory: int | None
    cpus: float | None
    timeout: float
    hang_after: float
    pythonpath: tuple[str, ...] = ()
    zygote: Zygote | None = field(default=None, compare=False)


def default_pythonpath() -> tuple[str, ...]:
    """The working directory and this interpreter's ``sys.path`` directories, so the trial
    imports MODULE and shmguard as the caller does."""
    dirs = [os.getcwd(), *(p or os.getcwd() for p in sys.path)]
    return tuple(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def trial_env(plan: TrialPlan) -> dict[str, str]:
    """The environment of ``plan``'s trials: ours, with its ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(plan.pythonpath or default_pythonpath())}


def predicted_peak(config: TrialConfig, batch_pages: int) -> int:
    """The DataLoader model's peak for ``config`` (one rank, one iterator), in bytes."""
    spec = LoaderSpec(
        batch_pages,
        config.num_workers,
        config.prefetch_factor or 2,
        pin_memory=config.pin_memory,
        persistent_workers=config.persistent_workers,
    )
    return predict(spec).per_iterator_peak


def _report(stdout: bytes) -> dict[str, Any] | None:
    """The child's last report line (after whatever the user's code printed), parsed."""
    from shmguard.torch.tuning._child import MARKER

    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        at = line.find(MARKER)
        if at >= 0:
            try:
                data = json.loads(line[at + len(MARKER) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _spec(plan: TrialPlan) -> dict[str, Any]:
    return {
        "loader": plan.loader,
        "steps": plan.steps,
        "warmup": plan.warmup,
        "step_time": plan.step_time,
    }


def _measure(plan: TrialPlan, spec: dict[str, Any]) -> tuple[dict[str, Any] | None, MeasureResult]:
    """Run the child with ``spec`` in a sandbox of ``plan`` (forked from its fork server when
    it has a live one; a fresh Python when the server died during the run); its report and
    measure's result, whose memory peak counts the server's memory (:mod:`.zygote`).

    Raises:
        TuneInputError: the child says the factory is at fault.
    """
    zygote = plan.zygote if plan.zygote is not None and not plan.zygote.dead else None
    if zygote is None:
        return _measure_once(plan, spec, None)
    memory = None if plan.memory is None else plan.memory - zygote.anon
    report, result = _measure_once(replace(plan, memory=memory), spec, zygote)
    if zygote.dead and not result.interrupted:
        return _measure_once(plan, spec, None)
    peak = result.memory_peak
    if peak.value is not None:
        peak = replace(peak, value=peak.value + zygote.anon)
    return report, replace(result, memory_limit=plan.memory, memory_peak=peak)


def _measure_once(
    plan: TrialPlan, spec: dict[str, Any], zygote: Zygote | None
) -> tuple[dict[str, Any] | None, MeasureResult]:
    out = bytearray()

    def keep(stream: str, chunk: bytes) -> None:
        if stream == "stdout":
            out.extend(chunk)
            del out[: -(1 << 20)]

    result = measure_command(
        [sys.executable, "-m", "shmguard.torch.tuning._child", json.dumps(spec)],
        shm_size=plan.shm,
        memory_limit=plan.memory,
        cpus=plan.cpus,
        timeout=plan.timeout,
        hang_after=plan.hang_after,
        output="capture",
        on_output=keep,
        env=trial_env(plan),
        launcher=zygote.launch if zygote is not None else None,
    )
    # Imported here, not at the top: the package must not import the module that
    # ``python -m`` runs (runpy warns in every trial).
    from shmguard.torch.tuning._child import EXIT_INPUT

    report = _report(bytes(out))
    if report is not None and "error" in report and result.exit_status == EXIT_INPUT:
        raise TuneInputError(str(report["message"]))
    return report, result


def run_trial(plan: TrialPlan, config: TrialConfig) -> tuple[Trial, MeasureResult]:
    """Run ``config`` under ``plan`` and return the trial and measure's result.

    Raises:
        TuneInputError: the factory is at fault (the same for every configuration).
        shmguard.measure.sandbox.SandboxError: the sandbox cannot be set up.
    """
    report, result = _measure(plan, {**_spec(plan), "kwargs": config.kwargs()})
    return _trial(config, result, report), result


def rate(figures: dict[str, Any]) -> float:
    """Samples per second of one timed run of the child."""
    return float(figures["samples"]) / max(float(figures["elapsed"]), 1e-9)


def run_confirmation(
    plan: TrialPlan, configs: list[TrialConfig], rounds: int
) -> tuple[list[list[float]] | None, str, MeasureResult]:
    """Measure ``configs`` again, ``rounds`` times each in alternation (A B C A B C ...), in
    one sandbox of ``plan`` (one process for all of them).

    Returns:
        ``(rates, reason, result)``: samples/s of each configuration's runs in order, or None
        and one sentence on why the confirmation gave nothing (interrupted, failed).

    Raises:
        TuneInputError: the factory is at fault.
        shmguard.measure.sandbox.SandboxError: the sandbox cannot be set up.
    """
    spec = {**_spec(plan), "configs": [c.kwargs() for c in configs], "rounds": rounds}
    report, result = _measure(plan, spec)
    if result.interrupted:
        return None, f"interrupted by {result.interrupted}", result
    if not result.passed or report is None or "runs" not in report:
        summary = result.cause.summary.rstrip(".")
        tail = result.stderr_tail[-1] if result.stderr_tail else ""
        return None, f"{summary}: {tail}" if tail else summary, result
    return [[rate(f) for f in runs] for runs in report["runs"]], "", result


def _trial(config: TrialConfig, result: MeasureResult, report: dict[str, Any] | None) -> Trial:
    pages = padded_bytes(report["leaves"]) if report and report.get("leaves") else 0
    cpu = result.timeline.owners[-1].cpu_seconds if result.timeline.owners else None
    common: dict[str, Any] = {
        "peak_shm": max(result.peak - result.baseline, 0),
        "predicted_peak": predicted_peak(config, pages) if pages else None,
        "memory_peak": result.memory_peak.value,
        "cpu_seconds": cpu,
        "wall_time": result.wall_time,
        "outcome": result.cause.outcome.value,
        "batch_pages": pages,
    }
    if result.interrupted:
        return Trial(config, "interrupted", f"interrupted by {result.interrupted}", **common)
    if result.passed and report is not None and "elapsed" in report:
        elapsed = max(float(report["elapsed"]), 1e-9)
        return Trial(
            config,
            "ok",
            samples_per_s=rate(report),
            data_wait=min(1.0, float(report["wait"]) / elapsed),
            epochs=int(report["epochs"]),
            **common,
        )
    summary = result.cause.summary.rstrip(".")
    if result.cause.outcome in INFEASIBLE:
        return Trial(config, "infeasible", f"{result.cause.outcome.value}: {summary}", **common)
    tail = result.stderr_tail[-1] if result.stderr_tail else ""
    reason = f"{summary}: {tail}" if tail else summary
    return Trial(config, "failed", reason, **common)


def ruled_out(config: TrialConfig, batch_pages: int, shm: int) -> Trial | None:
    """A ``ruled-out`` trial when the model's peak for ``config`` exceeds ``shm`` bytes, else
    None."""
    peak = predicted_peak(config, batch_pages)
    if peak <= shm:
        return None
    from shmguard.units import format_iec

    return Trial(
        config,
        "ruled-out",
        f"model peak {format_iec(peak)} > {format_iec(shm)} budget",
        predicted_peak=peak,
        batch_pages=batch_pages,
    )

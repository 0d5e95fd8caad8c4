"""The JSON body of each command's report value, for :func:`shmguard.render.json.dumps`: one
serializer per value, so a field is added in one place (and in the command's schema,
src/shmguard/schemas/<command>.schema.json). The CLI calls these and never builds a JSON dict.

Bodies hold library values (facts, findings, enums, dataclasses) that
:func:`~shmguard.render.json.to_data` converts; sizes are int bytes. Nothing heavy is imported
at module level (doctor's ``--json`` path starts fast and never loads Rich).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    from shmguard.lint.doctor import DoctorReport
    from shmguard.lint.engine import Rule
    from shmguard.measure.probe_result import ProbeResult, Trial
    from shmguard.measure.run import MeasureResult
    from shmguard.measure.sandbox_result import SandboxResult, SandboxSpec
    from shmguard.model import FailOn
    from shmguard.monitor.rightsize import RightsizeOptions, RightsizeReport

_LEVELS = ("error", "warning", "info")


def doctor_body(
    report: DoctorReport, fail_on: FailOn, exit_status: int, config: Path | None
) -> dict[str, Any]:
    """``shmguard.doctor/1``: the host facts, the findings and a summary (counts per severity,
    the ``--fail-on`` threshold, the exit status, the workload class, the configuration file
    read or None)."""
    counts = {s: sum(f.severity.value == s for f in report.findings) for s in _LEVELS}
    return {
        "facts": report.facts,
        "findings": report.findings,
        "summary": {
            **counts,
            "fail_on": fail_on,
            "exit_status": exit_status,
            "workload": report.workload,
            "config": str(config) if config is not None else None,
        },
    }


def sandbox_body(spec: SandboxSpec, result: SandboxResult) -> dict[str, Any]:
    """``shmguard.sandbox/1``: the limits the command ran under and how it ended."""
    return {
        "command": list(spec.command),
        "shm_size": spec.shm_size,
        "memory_limit": spec.memory_limit,
        "cpus": spec.cpus,
        "exit_status": result.exit_status,
        "exit_code": result.exit_code,
        "signal": result.signal_name,
        "stopped_by": result.stopped_by,
        "exec_error": result.exec_error,
        "memory_peak": result.memory_peak,
        "proc_remounted": result.proc_remounted,
        "user_namespace": result.user_namespace,
        "wall_time": round(result.wall_time, 3),
        "leftovers": result.leftovers,
        "oom_kills": result.oom_kills,
    }


def measure_body(result: MeasureResult) -> dict[str, Any]:
    """``shmguard.measure/1``: a measured run (also probe's ``measure``); the timeline thinned
    to at most 2,000 change points, the peak kept."""
    from shmguard.render.measure_text import thin_samples

    tl = result.timeline
    return {
        "command": list(result.command),
        "shm_size": result.shm_size,
        "memory_limit": result.memory_limit,
        "cpus": result.cpus,
        "exit_status": result.exit_status,
        "signal": result.signal,
        "stopped_by": result.stopped_by,
        "cause": result.cause,
        "peak": result.peak,
        "peak_at": round(result.peak_at, 4),
        "baseline": result.baseline,
        "owners_at_peak": result.owners_at_peak,
        "rss_peak": result.rss_peak,
        "memory_peak": result.memory_peak,
        "wall_time": round(result.wall_time, 3),
        "sampling": {
            "interval": tl.interval,
            "samples": tl.n_samples,
            "mean_interval": round(tl.mean_interval, 6),
            "max_gap": round(tl.max_gap, 6),
            "realtime": tl.realtime,
            "owner_scans": len(tl.owners),
            "errors": list(tl.errors),
        },
        "timeline": [[round(t, 4), u] for t, u in thin_samples(tl)],
        "recommendation": result.recommendation,
    }


def probe_body(result: ProbeResult) -> dict[str, Any]:
    """``shmguard.probe/1``: the measuring run, every trial, the minimum and the sizes."""
    model = result.model
    return {
        "command": list(result.command),
        "measure": measure_body(result.measure),
        "floor": result.floor,
        "tolerance": result.tolerance,
        "confirm": result.confirm,
        "minimum": result.minimum,
        "minimum_basis": result.minimum_basis,
        "start_basis": result.start_basis,
        "model": None
        if model is None
        else {
            "workers": model.workers,
            "batch_bytes": model.batch_bytes,
            "prefetch_factor": model.prefetch_factor,
            "steady": model.prediction.steady,
            "peak": model.prediction.peak,
        },
        "trial_time": result.trial_time,
        "survived": result.survived,
        "stderr_tail": list(result.measure.stderr_tail),
        "trials": [_trial(t) for t in result.trials],
        "pass_rates": result.pass_rates,
        "recommendation": result.recommendation,
        "verified": result.verified,
        "runs": result.runs,
        "wall_time": round(result.wall_time, 3),
    }


def _trial(trial: Trial) -> dict[str, Any]:
    from shmguard.render.json import to_data

    data: dict[str, Any] = to_data(trial)
    data["wall_time"] = round(trial.wall_time, 3)
    return data


def recommend_body(
    report: RightsizeReport,
    options: RightsizeOptions,
    patch_files: Mapping[tuple[str, str], str],
    manifests: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """``shmguard.recommend/1``: the report's workloads (``rightsize_data``) with the options
    that sized them, and ``manifests`` (the edits made or shown with ``--manifests``) when
    given."""
    from shmguard.render.rightsize_text import rightsize_data

    extra: dict[str, object] = {
        "percentile": options.percentile,
        "min_samples": options.min_samples,
    }
    if manifests is not None:
        extra["manifests"] = manifests
    return rightsize_data(report, extra, patch_files)


def rules_body(rules: Iterable[Rule[Any, Any]]) -> dict[str, Any]:
    """``shmguard.rules/1``: each rule's metadata, in the order given (a user-defined check's
    code starts with USR)."""
    return {
        "rules": [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary,
                "severity": r.severity,
                "by_workload": dict(r.by_workload),
                "variants": dict(r.variants),
                "fix": r.fix,
                "targets": r.targets,
                "user_defined": r.code.startswith("USR"),
            }
            for r in rules
        ]
    }

"""The JSON body of each command's report value, for :func:`shmguard.render.json.dumps`: one
serializer per value, so a field is added in one place (and in the command's schema,
src/shmguard/schemas/<command>.schema.json). The CLI calls these and never builds a JSON dict.

Bodies hold library values (facts, findings, enums, dataclasses) that
:func:`~shmguard.render.json.to_data` converts; sizes are int bytes. Nothing heavy is imported
at module level (doctor's ``--json`` path starts fast and never loads Rich).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from pathlib import Path

    from shmguard.estimate.plan import Plan, PlanFit
    from shmguard.lint.baseline import BaselineEntry
    from shmguard.lint.doctor import DoctorReport
    from shmguard.lint.engine import Rule
    from shmguard.lint.proposal import ManifestResult, Proposal
    from shmguard.lint.report import CheckReport
    from shmguard.measure.probe_result import ProbeResult, Trial
    from shmguard.measure.run import MeasureResult
    from shmguard.measure.sandbox_result import SandboxResult, SandboxSpec
    from shmguard.model import FailOn
    from shmguard.monitor.rightsize import (
        RightsizeOptions,
        RightsizeReport,
        WorkloadRecommendation,
    )
    from shmguard.monitor.watch import WatchSnapshot
    from shmguard.torch.tuning.model import TuneResult
    from shmguard.triage.model import Diagnosis

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
    patch_files: Mapping[tuple[str, str], str] | None = None,
    manifests: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """``shmguard.recommend/1``: where, when, how (the options that sized them), ``manifests``
    (:func:`manifests_body`, with ``--manifests``) when given, and one object per workload
    container (figures read, sizes proposed with their basis, fix values and snippets, the
    patch file written for it or null)."""
    files = patch_files or {}
    body: dict[str, Any] = {
        "prometheus": report.prometheus,
        "window": report.window_text,
        "window_seconds": report.window,
        "evaluated_at": report.evaluated_at,
        "owners": report.owners,
        "percentile": options.percentile,
        "min_samples": options.min_samples,
    }
    if manifests is not None:
        body["manifests"] = manifests
    body["workloads"] = [_workload(w, files) for w in report.workloads]
    return body


def _workload(w: WorkloadRecommendation, files: Mapping[tuple[str, str], str]) -> dict[str, Any]:
    from shmguard.monitor.manifests import workload_name
    from shmguard.render.json import to_data

    h = w.history
    return {
        "namespace": h.namespace,
        "kind": h.workload.kind,
        "workload": h.workload.name,
        "named_by": h.workload.source,
        "container": h.container,
        "volume": h.volume,
        "pods": list(h.pods),
        "peak": h.peak,
        "used_percentile": h.used_percentile,
        "size": h.size,
        "memory_limit": h.memory_limit,
        "memory_limit_from": h.memory_limit_from,
        "shmem_peak": h.shmem_peak,
        "required": h.required,
        "samples": h.samples,
        "first_seen": h.first_seen,
        "last_seen": h.last_seen,
        "coverage": w.coverage,
        "enough_history": w.enough_history,
        "confidence": w.confidence,
        "recommendation": to_data(w.recommendation),
        "shm_change": w.shm_change,
        "memory_change": w.memory_change,
        "patch": files.get((workload_name(w), h.container)),
    }


def manifests_body(
    results: Sequence[ManifestResult],
    proposals: Sequence[Proposal],
    skipped: Mapping[tuple[str, str], str],
    written: bool,
    diffs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``manifests`` member of ``shmguard.recommend/1``: each manifest file read, the
    workloads it holds, the changes made (``written``) or shown, and what had no manifest or no
    proposal."""
    from shmguard.render.check_text import diagnostic_line
    from shmguard.render.manifests_text import unmatched

    diffs = diffs or {}
    return {
        "written": written,
        "files": [
            {
                "file": r.path,
                "workloads": [{"workload": p.label, "container": p.container} for p in r.matched],
                "changes": list(r.applied),
                "not_applied": list(r.not_applied),
                "left": list(r.left),
                "diagnostics": [diagnostic_line(d) for d in r.diagnostics],
                "diff": diffs.get(r.path),
            }
            for r in results
        ],
        "no_manifest": [
            {"workload": p.label, "container": p.container} for p in unmatched(results, proposals)
        ],
        "not_proposed": [
            {"workload": name, "container": container, "why": why}
            for (name, container), why in skipped.items()
        ],
    }


def plan_body(
    plan: Plan, fit: PlanFit | None = None, workers: int | None = None, free: int | None = None
) -> dict[str, Any]:
    """The ``shmguard.plan/1`` body (docs/plan.md; schema in schemas/plan.schema.json)."""
    from shmguard.fix.snippets import fix_snippets

    r = plan.request
    p = plan.prediction
    body: dict[str, Any] = {
        "loader": {
            "num_workers": r.num_workers,
            "prefetch_factor": r.prefetch_factor,
            "batch_size": r.batch_size,
            "sample_shape": list(r.sample_shape) if r.sample_shape is not None else None,
            "dtype": r.dtype if r.batch_bytes is None else None,
            "batch_bytes": r.batch_bytes,
            "pin_memory": r.pin_memory,
            "persistent_workers": r.persistent_workers,
            "drops_batch": r.drops_batch,
            "local_ranks": r.local_ranks,
            "loaders": r.loaders,
            "model_peak": r.model_peak,
        },
        "storages": list(plan.storages),
        "batch_pages": plan.batch_pages,
        "prediction": {
            "steady": p.steady,
            "peak": p.peak,
            "fast_low": p.fast_low,
            "per_iterator_steady": p.per_iterator_steady,
            "per_iterator_peak": p.per_iterator_peak,
            "semaphores": p.semaphores,
            "pinned_memory": p.pinned_memory,
            "in_flight": p.in_flight,
        },
        "notes": list(p.notes),
        "shm_size": plan.shm.bytes if plan.shm is not None else None,
        "shm_basis": plan.shm.basis if plan.shm is not None else "num_workers=0 uses no /dev/shm",
        "memory_limit": plan.memory_limit,
        "memory_basis": plan.memory_basis,
        "changes": plan.changes,
        "snippets": fix_snippets(plan),
        "check": None,
        "max_workers": None,
    }
    if fit is not None:
        body["check"] = {
            "path": fit.path,
            "free": fit.free,
            "total": fit.total,
            "peak": fit.peak,
            "fits": fit.fits,
        }
    if workers is not None:
        body["max_workers"] = {"workers": workers, "free": free}
    return body


def tune_body(result: TuneResult) -> dict[str, Any]:
    """The ``shmguard.tune/1`` body (docs/tune.md; schema in schemas/tune.schema.json)."""
    from shmguard.render.json import to_data

    body: dict[str, Any] = to_data(result)
    rec = result.recommended
    body["recommended_kwargs"] = rec.config.kwargs() if rec is not None else None
    body["budget"]["rank_shm"] = result.budget.rank_shm
    body["budget"]["rank_memory"] = result.budget.rank_memory
    body["budget"]["rank_cpus"] = result.budget.rank_cpus
    return body


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


def check_body(report: CheckReport) -> dict[str, Any]:
    """check's body (``shmguard.check/1``): ``files`` (per file its path, kind, findings and
    diagnostics, in the order checked), ``skipped`` (the files a directory walk met and did
    not check, with why) and ``summary`` (findings per severity, files, fixes, baselined
    findings, the threshold, the exit status, the configuration file read, and ``skipped``
    counts by reason)."""
    findings = report.findings
    counts = {s: sum(f.severity.value == s for f in findings) for s in _LEVELS}
    return {
        "files": [
            {
                "file": r.path,
                "kind": r.kind,
                "findings": r.findings,
                "diagnostics": [dataclasses.asdict(d) for d in r.diagnostics],
            }
            for r in report.results
        ],
        "skipped": [{"file": path, "reason": why} for path, why in report.skipped],
        "summary": {
            **counts,
            "files": len(report.files),
            "fixed": report.fixed,
            "baselined": report.baselined,
            "fail_on": report.fail_on,
            "exit_status": report.exit_status,
            "config": str(report.config) if report.config is not None else None,
            "skipped": report.skipped_counts,
        },
    }


def baseline_json(found: Iterable[BaselineEntry]) -> str:
    """A baseline file's text (``shmguard.baseline/1``, no final newline) holding ``found``
    (:attr:`CheckReport.new_baseline`); :func:`shmguard.lint.baseline.parse_baseline` reads
    it back."""
    from shmguard.render.json import dumps

    return dumps("baseline", {"findings": list(found)})


def check_json(report: CheckReport) -> str:
    """The whole document as indented JSON text (no final newline)."""
    return "".join(check_json_pieces(report))


def check_json_pieces(report: CheckReport) -> Iterator[str]:
    """:func:`check_json`'s text in pieces, each finding converted when it is written
    (:func:`~shmguard.render.json.dumps_pieces`)."""
    from shmguard.render.json import dumps_pieces

    return dumps_pieces("check", check_body(report))


def explain_body(d: Diagnosis) -> Mapping[str, Any]:
    """explain's ``--json`` body (``shmguard.explain/1``): the fields of
    :class:`~shmguard.triage.model.Diagnosis`, by name."""
    return {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}


def explain_file_body(name: str, d: Diagnosis) -> Mapping[str, Any]:
    """One entry of ``explain --per-file --json``: ``file`` (the path as given, ``<stdin>`` for
    standard input), then the fields of :func:`explain_body`."""
    return {"file": name, **explain_body(d)}


def watch_body(snap: WatchSnapshot) -> dict[str, Any]:
    """watch's ``--json`` body for one snapshot (``shmguard.watch/1``)."""
    from shmguard.monitor.watch import STALLED
    from shmguard.render.json import to_data
    from shmguard.render.watch_text import owners

    data: dict[str, Any] = to_data(snap)
    data["owners"] = owners(snap)
    data["used_fraction"] = round(snap.used_fraction, 6)
    data["stall"] = {
        "stalled": snap.stalled,
        "full": snap.stall.full,
        "headline": STALLED if snap.stalled else None,
        "evidence": list(snap.stall.evidence),
    }
    data["failed_allocations"] = [{"name": name, "bytes": n} for name, n in snap.failed_allocations]
    data["fix_size"] = (
        None
        if snap.fix_size is None
        else {"bytes": snap.fix_size.bytes, "basis": snap.fix_size.basis}
    )
    return data

"""``shmguard recommend``'s table and its per-workload Kubernetes patches (its JSON body,
``shmguard.recommend/1``: :func:`shmguard.render.json_bodies.recommend_body`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml

from shmguard.config import ANNOTATIONS
from shmguard.fix.k8s import POD_SPEC_PATHS, named_plan, strategic_merge_patch
from shmguard.monitor.manifests import memory_to_set, skip_reason, workload_name
from shmguard.monitor.rightsize import RightsizeReport, WorkloadRecommendation
from shmguard.render.escape import printable
from shmguard.render.words import plural
from shmguard.units import format_iec, format_k8s_quantity

if TYPE_CHECKING:
    from rich.table import Table


def _size(n: int | None) -> str:
    return "-" if n is None else format_iec(n)


def _change(now: int | None, new: int | None, delta: int | None) -> str:
    if new is None:
        return "-"
    if now is None or delta is None:
        return f"-> {format_iec(new)}"
    if delta == 0:
        return f"{format_iec(now)} (kept)"
    sign = "+" if delta > 0 else "-"
    return f"{format_iec(now)} -> {format_iec(new)} ({sign}{format_iec(abs(delta))})"


def rightsize_table(report: RightsizeReport, percentile: float) -> Table:
    """One row per workload container: peak, a high percentile, /dev/shm and memory limit now
    and proposed with the change, and the history behind it (or "not enough history")."""
    from rich.table import Table

    table = Table(
        title=printable(
            f"/dev/shm right-sizing from {report.prometheus}, last {report.window_text} "
            f"(workloads by {report.owners})"
        ),
        title_justify="left",
    )
    table.add_column("workload", overflow="fold")
    for col in ("container", "peak", f"p{percentile * 100:g}", "/dev/shm", "memory limit"):
        table.add_column(col, no_wrap=True)
    table.add_column("history", overflow="fold")
    for w in report.workloads:
        h, r = w.history, w.recommendation
        table.add_row(  # names read from the cluster: control characters escaped
            printable(workload_name(w)),
            printable(h.container or "-"),
            _size(h.peak),
            _size(h.used_percentile),
            _change(h.size, r.shm_size, w.shm_change),
            _change(h.memory_limit, r.memory_limit.value, w.memory_change),
            f"{plural(h.samples, 'sample')}, {w.coverage:.0%}"
            if w.enough_history
            else "not enough history",
        )
    return table


def basis_lines(report: RightsizeReport) -> list[str]:
    """How each proposal was reached and on how much data, one line each."""
    out = []
    for w in report.workloads:
        r = w.recommendation
        who = f"{workload_name(w)} {w.history.container or '-'}"
        out.append(f"{who}: history: {w.confidence}")
        out.append(f"{who}: /dev/shm: {r.shm_basis}")
        if r.shm_size is not None:
            out.append(f"{who}: memory: {r.memory_basis}")
    return [printable(line) for line in out]


@dataclass(frozen=True)
class Patch:
    """One workload's strategic merge patch: file name, YAML text, and the workloads' rows
    it covers (their ``workload_name`` and container)."""

    name: str
    text: str
    covers: tuple[tuple[str, str], ...]


def _patch_header(w: WorkloadRecommendation, size: int | None, name: str, window: str) -> str:
    h = w.history
    kind, ns, wl = h.workload.kind, h.namespace, h.workload.name
    shm = "kept" if size is None else f"-> {format_k8s_quantity(size)}"
    lines = [
        f"# shmguard recommend: {kind} {ns}/{wl}, /dev/shm peak {format_iec(h.peak)} "
        f"over {window}, /dev/shm {shm} (a strategic merge patch)",
    ]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "CronJob"):
        lines.append(f"# kubectl -n {ns} patch {kind.lower()} {wl} --patch-file {name}")
    elif kind == "Job/DaemonSet":
        lines.append(f"# a DaemonSet: kubectl -n {ns} patch daemonset {wl} --patch-file {name}")
        lines.append("# a Job: its pod template cannot change in place; patch its manifest:")
    else:
        lines.append(f"# a {kind}'s pod template cannot change in place; patch its manifest:")
    lines.append(f"# kubectl patch --local -f MANIFEST.yaml --patch-file {name} -o yaml")
    return "\n".join(lines) + "\n"


def workload_patches(report: RightsizeReport) -> tuple[list[Patch], dict[tuple[str, str], str]]:
    """A patch per workload (and node-mode volume) with a confident shm size: the largest
    proposal of its containers, each container's memory limit. Returns the patches and, for
    each row left without one, ``(workload_name, container) -> why``."""
    groups: dict[tuple[str, str, str, str], list[WorkloadRecommendation]] = {}
    skipped: dict[tuple[str, str], str] = {}
    for w in report.workloads:
        h, key = w.history, (workload_name(w), w.history.container)
        why = skip_reason(w)
        if why is not None:
            skipped[key] = why
        else:
            wk = (h.namespace, h.workload.kind, h.workload.name, h.volume)
            groups.setdefault(wk, []).append(w)
    patches = []
    for (ns, kind, wl, volume), rows in groups.items():
        size = max(w.recommendation.shm_size or 0 for w in rows)
        # a /dev/shm every row keeps (shm_change 0) is left out of the patch, and so is a
        # memory limit that stays
        shm = None if all(w.shm_change == 0 for w in rows) else size
        limits = {w.history.container: memory_to_set(w) for w in rows}
        plan = named_plan(shm, limits, volume or None)
        body = strategic_merge_patch(kind, plan, ANNOTATIONS["shm-size"])
        keys = tuple((workload_name(w), w.history.container) for w in rows)
        if body is None:
            why = (
                f"a {kind}'s pod spec lies in its operator's replica specs: put the "
                "Kubernetes snippet of --json there"
                if kind not in POD_SPEC_PATHS
                else "nothing to change"
            )
            for k in keys:
                skipped[k] = why
            continue
        slug = kind.lower().replace("/", "-")
        name = f"{ns}-{slug}-{wl}{'-' + volume if volume else ''}.yaml"
        text = _patch_header(rows[0], shm, name, report.window_text) + yaml.safe_dump(
            body, sort_keys=False
        )
        patches.append(Patch(name, text, keys))
    return patches, skipped

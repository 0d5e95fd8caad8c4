"""Right-sizing from history (``shmguard recommend --prometheus URL``): each workload's /dev/shm
peak over a window, read from Prometheus, through the one sizing policy.

As krr's simple strategy does for memory (the peak over the history plus a buffer, and no
recommendation under 100 data points: robusta-dev/krr, ``SimpleStrategySettings``), the need
is the highest ``shmguard_shm_peak_bytes`` any of the workload's pods reached in the window
(the exporter's peak already catches spikes between scrapes); it goes through
:func:`shmguard.estimate.recommend.recommend` (headroom, the configured need
``shmguard_shm_required_bytes`` as a floor, clean rounding), and the memory limit is the current
one raised by what the new /dev/shm needs (never cut: the exporter does not export the job's
non-shm use). Per series (namespace, pod, container, volume) the queries are, at one
evaluation time, over the window ``W``:

* ``max_over_time(shmguard_shm_peak_bytes[W])``: the need;
* ``quantile_over_time(Q, shmguard_shm_used_bytes[W])``: the usual high use (shown, not sized);
* ``last_over_time`` of ``shmguard_shm_size_bytes``, ``shmguard_cgroup_memory_limit_bytes``,
  ``shmguard_shm_required_bytes`` and kube-state-metrics'
  ``kube_pod_container_resource_limits{resource="memory"}`` (preferred for the limit: the
  exporter's cgroup figure is its own container's unless it runs with ``--pid``);
  ``max_over_time`` of ``shmguard_cgroup_memory_shmem_bytes``;
* ``count_over_time(shmguard_shm_used_bytes[W])``: the samples behind it, and the first and last
  sample times (``timestamp`` in a subquery at W/1000 steps): how much of the window has data.

Pods are grouped into workloads by :mod:`shmguard.monitor.workloads` (kube-state-metrics'
``kube_pod_owner`` when Prometheus has it, else the pod names). For a workload the peak,
size, limit and need are the largest of its pods', the percentile the largest of its pods'
percentiles, the samples their sum.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shmguard.estimate.decide import Need
from shmguard.estimate.policy import Policy
from shmguard.estimate.recommend import Recommendation, no_recommendation, recommend
from shmguard.monitor.prom import PromClient, PromError, PromQueryError, Sample, prom_duration
from shmguard.monitor.workloads import Owners, WorkloadRef
from shmguard.units import DOCKER_DEFAULT_SHM, format_iec

#: Labels a per-pod series is keyed by (sidecar mode has no ``volume``; node mode no container).
SERIES_LABELS = ("namespace", "pod", "container", "volume")
#: The exporter's series are also kept apart by ``instance`` (the scrape address): exporters
#: outside Kubernetes (Docker, a host) have no ``pod`` label, and without it every one of them
#: would fold into one row.
_BY = (*SERIES_LABELS, "instance")
#: Data points under which a workload has "not enough history" (krr's ``points_required``).
MIN_SAMPLES = 100

#: Why a /dev/shm larger than the need is kept when the need fits in the runtimes' default.
KEEP_REASON = "a tmpfs holds only the pages written: a smaller one frees no memory"
#: The memory sentence of a series without a memory limit.
NO_LIMIT = (
    "no memory limit in Prometheus (none is set, or a node-mode series): none proposed; "
    "a limit must leave room for the /dev/shm size beside the job (tmpfs pages are charged)"
)

Query = Callable[[str], Sequence[Sample]]


@dataclass(frozen=True)
class RightsizeOptions:
    """How ``recommend`` reads and sizes.

    Attributes:
        window: seconds of history to read (> 0).
        window_text: the window as the user wrote it (``7d``), for sentences.
        percentile: the quantile of used bytes shown beside the peak (0 < q < 1).
        min_samples: samples a workload needs for a confident recommendation.
        namespace: only series with this ``namespace`` label, or None for all.
        policy: the sizing policy.
    """

    window: float = 7 * 86400.0
    window_text: str = "7d"
    percentile: float = 0.99
    min_samples: int = MIN_SAMPLES
    namespace: str | None = None
    policy: Policy = field(default_factory=Policy)


@dataclass(frozen=True)
class WorkloadHistory:
    """What Prometheus holds for one workload's container over the window. Bytes are int;
    None: no such series (a node-mode exporter has no cgroup figures).

    Attributes:
        namespace, workload, container, volume: what the figures belong to (``volume``: the
            emptyDir's name in node mode, else empty).
        pods: the pods seen, sorted (none for a series with no ``pod`` label).
        peak: highest ``shmguard_shm_peak_bytes``.
        used_percentile: the largest of the pods' ``percentile`` quantiles of used bytes.
        size: the /dev/shm size last seen (largest over the pods).
        memory_limit: the container's memory limit last seen, or None: kube-state-metrics'
            ``kube_pod_container_resource_limits{resource="memory"}`` when Prometheus has it
            for the container (the pod spec's own figure), else the exporter's
            ``shmguard_cgroup_memory_limit_bytes`` (the cgroup of the process it watches:
            with ``--pid`` the job's, without it the exporter's own container).
        memory_limit_from: which of the two gave ``memory_limit`` (the metric's name).
        shmem_peak: highest ``shmguard_cgroup_memory_shmem_bytes``, or None.
        required: the configured need last seen (``shmguard_shm_required_bytes``), or None.
        samples: scraped samples of used bytes, all pods together.
        first_seen, last_seen: unix times of the first and last sample (to the subquery step).
    """

    namespace: str
    workload: WorkloadRef
    container: str
    volume: str
    pods: tuple[str, ...]
    peak: int
    used_percentile: int | None
    size: int | None
    memory_limit: int | None
    memory_limit_from: str | None
    shmem_peak: int | None
    required: int | None
    samples: int
    first_seen: float | None
    last_seen: float | None


@dataclass(frozen=True)
class WorkloadRecommendation:
    """One workload's proposal.

    Attributes:
        history: the figures read (:class:`WorkloadHistory`).
        recommendation: sizes, basis sentences and fix values through the sizing policy.
        coverage: share of the window between the first and last sample (0..1).
        enough_history: at least ``min_samples`` samples.
        confidence: one sentence: samples, pods, how much of the window has data; starts
            with "not enough history" under the minimum.
        shm_change, memory_change: proposed minus current bytes, or None when either is unknown.
    """

    history: WorkloadHistory
    recommendation: Recommendation
    coverage: float
    enough_history: bool
    confidence: str
    shm_change: int | None
    memory_change: int | None


@dataclass(frozen=True)
class RightsizeReport:
    """``recommend``'s result: where and when it read, how workloads were named, and one
    :class:`WorkloadRecommendation` per workload container, sorted by namespace and name."""

    prometheus: str
    window: float
    window_text: str
    evaluated_at: float
    owners: str
    workloads: tuple[WorkloadRecommendation, ...]


def _key(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(labels.get(k, "") for k in _BY)


def _queries(options: RightsizeOptions) -> dict[str, str]:
    w = prom_duration(options.window)
    step = prom_duration(options.window / 1000)
    sel = _selector(options)
    by, ksm_by = f"max by ({', '.join(_BY)})", f"max by ({', '.join(SERIES_LABELS)})"
    used = f"shmguard_shm_used_bytes{sel}"
    ksm = '{resource="memory"' + ("" if not sel else f",{sel[1:-1]}") + "}"
    return {
        "peak": f"{by} (max_over_time(shmguard_shm_peak_bytes{sel}[{w}]))",
        "quantile": f"{by} (quantile_over_time({options.percentile:g}, {used}[{w}]))",
        "size": f"{by} (last_over_time(shmguard_shm_size_bytes{sel}[{w}]))",
        "limit": f"{by} (last_over_time(shmguard_cgroup_memory_limit_bytes{sel}[{w}]))",
        "shmem": f"{by} (max_over_time(shmguard_cgroup_memory_shmem_bytes{sel}[{w}]))",
        "required": f"{by} (last_over_time(shmguard_shm_required_bytes{sel}[{w}]))",
        # kube-state-metrics' own instance is no pod's: that series is matched without it
        "ksm_limit": f"{ksm_by} (last_over_time(kube_pod_container_resource_limits{ksm}[{w}]))",
        "samples": f"sum by ({', '.join(_BY)}) (count_over_time({used}[{w}]))",
        "first": f"min by ({', '.join(_BY)}) (min_over_time(timestamp({used})[{w}:{step}]))",
        "last": f"{by} (max_over_time(timestamp({used})[{w}:{step}]))",
    }


def _selector(options: RightsizeOptions) -> str:
    """``{namespace="NS"}`` for ``--namespace``, else empty."""
    if options.namespace is None:
        return ""
    return f"{{namespace={json.dumps(options.namespace)}}}"


def _owners(query: Query, options: RightsizeOptions) -> Owners | None:
    w, sel = prom_duration(options.window), _selector(options)
    pod_owner = query(f"last_over_time(kube_pod_owner{sel}[{w}])")
    if not pod_owner:
        return None
    return Owners.from_samples(
        pod_owner,
        query(f"last_over_time(kube_replicaset_owner{sel}[{w}])"),
        query(f"last_over_time(kube_job_owner{sel}[{w}])"),
    )


def read_histories(
    query: Query, options: RightsizeOptions
) -> tuple[tuple[WorkloadHistory, ...], str]:
    """Run the queries through ``query`` (one instant query -> its samples) and group the
    series into workloads. Returns the histories (sorted by namespace, workload, container,
    volume) and how workloads were named: ``kube_pod_owner`` or ``pod names``.

    Raises:
        PromError: from ``query``.
    """

    def ask(name: str, expr: str) -> Sequence[Sample]:
        try:
            return query(expr)
        except PromQueryError as err:  # say which of the queries, and what makes it lighter
            raise PromError(
                f"{err} (the {name} query, over {options.window_text}; a shorter --window or "
                "--namespace reads fewer samples)"
            ) from None

    found = {
        name: {_key(s.labels): s.value for s in ask(name, q)}
        for name, q in _queries(options).items()
    }
    owners = _owners(query, options)
    naming = owners or Owners({}, {})
    groups: dict[tuple[str, WorkloadRef, str, str], list[tuple[str, ...]]] = {}
    for key in found["samples"]:
        namespace, pod, container, volume, instance = key
        if pod:
            ref = naming.workload(namespace, pod)
        else:  # an exporter outside Kubernetes: named by where it is scraped
            ref = WorkloadRef("instance", instance or "?", "instance")
        groups.setdefault((namespace, ref, container, volume), []).append(key)

    def top(
        name: str, keys: list[tuple[str, ...]], pick: Callable[..., float] = max
    ) -> float | None:
        if name == "ksm_limit":
            keys = [(*k[:4], "") for k in keys]
        values = [found[name][k] for k in keys if k in found[name]]
        return pick(values) if values else None

    def as_int(x: float | None) -> int | None:
        # NaN or Inf (a series that is not the exporter's) is no figure
        return None if x is None or not math.isfinite(x) else int(x)

    out = []
    for (namespace, ref, container, volume), keys in groups.items():
        limit = top("ksm_limit", keys)
        limit_from: str | None = "kube_pod_container_resource_limits"
        if limit is None:
            limit, limit_from = top("limit", keys), "shmguard_cgroup_memory_limit_bytes"
        if limit is None:
            limit_from = None
        out.append(
            WorkloadHistory(
                namespace=namespace,
                workload=ref,
                container=container,
                volume=volume,
                pods=tuple(sorted({k[1] for k in keys if k[1]})),
                peak=as_int(top("peak", keys)) or 0,
                used_percentile=as_int(top("quantile", keys)),
                size=as_int(top("size", keys)),
                memory_limit=as_int(limit),
                memory_limit_from=limit_from,
                shmem_peak=as_int(top("shmem", keys)),
                required=as_int(top("required", keys)),
                samples=int(sum(found["samples"][k] for k in keys)),
                first_seen=top("first", keys, min),
                last_seen=top("last", keys),
            )
        )
    out.sort(key=lambda h: (h.namespace, h.workload.name, h.workload.kind, h.container, h.volume))
    return tuple(out), "kube_pod_owner" if owners is not None else "pod names"


def _span_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}".replace(".0", "")
    return f"{seconds:.0f}s" if seconds >= 1 else "under 1s"


def size_history(h: WorkloadHistory, options: RightsizeOptions) -> WorkloadRecommendation:
    """The proposal for one workload's history through the sizing policy.

    A size within the runtimes' 64 MiB default that is smaller than the /dev/shm the workload
    has is not proposed: the current one is kept (the policy's floor), since a tmpfs charges
    only the pages written, so a smaller one frees no memory and only risks the next peak.
    Larger sizes are proposed either way (a /dev/shm far above the need can let a runaway job
    fill the memory limit).
    """

    def sized(floor: Need | None, keep: bool = False) -> Recommendation:
        return recommend(
            h.peak,
            f"peak over {options.window_text}",
            policy=options.policy,
            need_floor=floor,
            current_limit=h.memory_limit,
            current_shm=h.size or 0,
            keep_current=keep,
        )

    if h.peak > 0:
        need = "the configured need (shmguard_shm_required_bytes)"
        rec = sized(Need(h.required, need) if h.required else None)
        shm = rec.shm_size
        if h.size and shm is not None and shm < h.size and shm <= DOCKER_DEFAULT_SHM:
            # the configured need, if any, fits in the current size too: the peak's own
            # sentence says why the current one is enough
            # kept to the byte: a host's or an unsized emptyDir's /dev/shm (half of the node's
            # memory) is rarely a clean size, and rounding it up would be a change
            fits = sized(None).shm_basis
            rec = sized(None, keep=True)
            rec = replace(
                rec, shm_basis=f"{fits}; the current {format_iec(h.size)} is kept ({KEEP_REASON})"
            )
        if h.memory_limit is None:
            rec = replace(rec, memory_basis=NO_LIMIT)
    else:
        rec = no_recommendation(
            f"no /dev/shm use in {options.window_text}: any size works (the runtimes' default "
            "64 MiB included)",
            policy=options.policy,
        )
    span = 0.0
    if h.first_seen is not None and h.last_seen is not None:
        span = max(0.0, h.last_seen - h.first_seen)
    coverage = min(1.0, span / options.window)
    enough = h.samples >= options.min_samples
    pods = f"{len(h.pods)} pod{'s' if len(h.pods) != 1 else ''}"
    if h.workload.source == "instance":
        pods = f"the exporter at {h.workload.name}"
    samples = f"{h.samples} {'sample' if h.samples == 1 else 'samples'}"
    confidence = (
        f"{samples} from {pods} over {_span_text(span)} of the "
        f"{options.window_text} window ({coverage:.0%})"
    )
    if not enough:
        confidence = f"not enough history: {confidence}; {options.min_samples} needed"
    shm, mem = rec.shm_size, rec.memory_limit.value
    return WorkloadRecommendation(
        history=h,
        recommendation=rec,
        coverage=coverage,
        enough_history=enough,
        confidence=confidence,
        shm_change=None if shm is None or h.size is None else shm - h.size,
        memory_change=None if mem is None or h.memory_limit is None else mem - h.memory_limit,
    )


def rightsize(
    url: str, options: RightsizeOptions | None = None, *, now: float | None = None
) -> RightsizeReport:
    """Read the exporter's series from the Prometheus at ``url`` and propose each workload's
    /dev/shm size and memory limit.

    Args:
        url: Prometheus's base URL.
        options: window, percentile, minimum samples, namespace, policy.
        now: evaluation time (unix seconds; default: now).

    Raises:
        ValueError: ``url`` is not an http(s) URL.
        PromError: Prometheus cannot be read, or holds no shmguard series in the window.
    """
    options = options or RightsizeOptions()
    client = PromClient(url)
    at = time.time() if now is None else now
    histories, owners = read_histories(lambda q: client.query(q, at), options)
    if not histories:
        where = "" if options.namespace is None else f" in namespace {options.namespace}"
        raise PromError(
            f"{client.url}: no shmguard series (shmguard_shm_used_bytes){where} in the last "
            f"{options.window_text}: is the exporter scraped?"
        )
    return RightsizeReport(
        prometheus=client.url,
        window=options.window,
        window_text=options.window_text,
        evaluated_at=at,
        owners=owners,
        workloads=tuple(size_history(h, options) for h in histories),
    )

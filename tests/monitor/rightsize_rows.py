"""recommend's rows derived from Prometheus API answers recorded from a real run
(tests/fixtures/prometheus/rightsize.json, made by record_rightsize.py: a real Prometheus
scraping nine real exporters on filled sandbox tmpfs mounts, plus kube-state-metrics' owner
series), replayed query by query; shared by the right-sizing and --manifests tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shmguard.monitor.prom import Sample, parse_prom_duration, parse_vector
from shmguard.monitor.rightsize import (
    RightsizeOptions,
    RightsizeReport,
    WorkloadHistory,
    read_histories,
    size_history,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus" / "rightsize.json"
RECORDED = json.loads(FIXTURE.read_text())
OPTIONS = RightsizeOptions(
    window=parse_prom_duration(RECORDED["window"]), window_text=RECORDED["window"]
)
OWNER_QUERIES = [q for q in RECORDED["answers"] if "kube_" in q]


def replay(without_owners: bool = False) -> Any:
    """A query function answering from the recording; ``without_owners``: the owner queries
    answer the empty vector a Prometheus without kube-state-metrics gives."""

    def query(expr: str) -> list[Sample]:
        body = RECORDED["answers"][expr]
        if without_owners and expr in OWNER_QUERIES:
            body = {**body, "data": {"resultType": "vector", "result": []}}
        return parse_vector(body, "recorded")

    return query


def recorded_report(min_samples: int = 1, **changes: Any) -> RightsizeReport:
    """The recorded rows sized through the policy; ``changes``: workload name -> history
    fields to replace before sizing (``train={"peak": ..., "size": ...}``)."""
    options = RightsizeOptions(**{**OPTIONS.__dict__, "min_samples": min_samples})
    histories, owners = read_histories(replay(), options)
    rows = []
    for h in histories:
        if h.workload.name in changes:
            h = WorkloadHistory(**{**h.__dict__, **changes[h.workload.name]})
        rows.append(size_history(h, options))
    return RightsizeReport("recorded", options.window, "5m", RECORDED["now"], owners, tuple(rows))

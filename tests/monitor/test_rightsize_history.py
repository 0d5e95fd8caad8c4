"""Workload naming, grouping and sizing over Prometheus API answers recorded from a real run
(tests/fixtures/prometheus/rightsize.json, made by record_rightsize.py: a real Prometheus
scraping nine real exporters on filled sandbox tmpfs mounts, plus kube-state-metrics' owner
series), replayed query by query."""

from __future__ import annotations

import json

import pytest
import yaml
from record_rightsize import OWNERS, PODS
from rightsize_rows import OPTIONS, RECORDED, recorded_report, replay

from schema_registry import validator
from shmguard.estimate.policy import Policy, memory_limit_for, shm_size_for
from shmguard.monitor.prom import PromError, Sample, parse_prom_duration, parse_vector
from shmguard.monitor.rightsize import (
    RightsizeOptions,
    WorkloadHistory,
    read_histories,
    size_history,
)
from shmguard.monitor.workloads import Owners, workload_from_name
from shmguard.render.json import envelope
from shmguard.render.json_bodies import recommend_body
from shmguard.render.rightsize_text import workload_name, workload_patches
from shmguard.units import format_iec

MiB = 1 << 20


def by_name(histories: tuple[WorkloadHistory, ...]) -> dict[str, WorkloadHistory]:
    """The Kubernetes rows by namespace/Kind/name (the Docker exporters' rows left out)."""
    return {
        f"{h.namespace}/{h.workload.kind}/{h.workload.name}": h
        for h in histories
        if h.workload.source != "instance"
    }


def per_pod(metric_query_part: str) -> dict[str, float]:
    """A recorded per-pod answer (pod -> value) of the query containing ``metric_query_part``."""
    (q,) = [q for q in RECORDED["answers"] if metric_query_part in q]
    return {
        r["metric"]["pod"]: float(r["value"][1])
        for r in RECORDED["answers"][q]["data"]["result"]
        if "pod" in r["metric"]
    }


def test_every_recorded_pod_name_reads_as_its_controller_writes_it() -> None:
    kinds = {pod: workload_from_name(pod) for _, pod, *_ in PODS}
    assert {p: (w.kind, w.name) for p, w in kinds.items()} == {
        "train-7c9f8b6d5d-x2x4k": ("Deployment", "train"),
        "train-7c9f8b6d5d-qz7wp": ("Deployment", "train"),
        "resnet-6f7d9c8b5b-k2m4p": ("Deployment", "resnet"),
        "etl-0": ("StatefulSet", "etl"),
        "etl-1": ("StatefulSet", "etl"),
        "nightly-29412345-bv7kd": ("CronJob", "nightly"),
        "bert-master-0": ("TrainingJob", "bert"),
        "bert-worker-0": ("TrainingJob", "bert"),
        "scratch": ("Pod", "scratch"),
        "debug-pod-x2b4z": ("Job/DaemonSet", "debug-pod"),
    }
    assert all(w.source == "name" for w in kinds.values())


@pytest.mark.parametrize(
    ("pod", "kind", "name"),
    [
        ("my-app-v2-7c9f8b6d5d-x2x4k", "Deployment", "my-app-v2"),  # dashes in the name
        ("web-12", "StatefulSet", "web"),
        ("web-12345", "StatefulSet", "web"),  # digits 0, 1 and 3 are not in the hash alphabet
        ("job-abcde", "Pod", "job-abcde"),  # vowels never appear in generated suffixes
        ("sync-bcdfghj-x2x4k", "Deployment", "sync"),  # the documented false positive
        # 7 digits are no minute stamp, and 1 and 3 no hash: the Job's own name keeps them
        ("nightly-2941234-bv7kd", "Job/DaemonSet", "nightly-2941234"),
    ],
)
def test_name_rules_and_their_documented_limits(pod: str, kind: str, name: str) -> None:
    w = workload_from_name(pod)
    assert (w.kind, w.name) == (kind, name)


def test_owner_series_name_workloads_and_win_over_the_name_rules() -> None:
    histories, owners = read_histories(replay(), OPTIONS)
    assert owners == "kube_pod_owner"
    got = by_name(histories)
    assert set(got) == {
        "ml/Deployment/train",
        "ml/Deployment/resnet",
        "ml/StatefulSet/etl",
        "ml/CronJob/nightly",
        "ml/TrainingJob/bert",
        "ml/Pod/scratch",
        "research/Pod/debug-pod-x2b4z",
    }
    # kube_pod_owner -> kube_replicaset_owner / kube_job_owner: the top owner
    assert got["ml/Deployment/train"].workload.source == "owner"
    assert got["ml/CronJob/nightly"].workload.source == "owner"
    # owner_kind <none>: a bare pod, although its name reads as a Job's
    assert got["research/Pod/debug-pod-x2b4z"].workload.source == "owner"
    # pods kube-state-metrics does not list fall back to their names
    assert got["ml/StatefulSet/etl"].workload.source == "name"
    listed = {
        (ns, pod)
        for metric, _, _, rows in OWNERS
        if metric == "kube_pod_owner"
        for ns, pod, _, _ in rows
    }
    assert {
        (h.namespace, p) for h in histories if h.workload.source == "owner" for p in h.pods
    } == listed


def test_without_owner_series_the_names_decide() -> None:
    histories, owners = read_histories(replay(without_owners=True), OPTIONS)
    assert owners == "pod names"
    got = by_name(histories)
    assert "research/Job/DaemonSet/debug-pod" in got
    assert got["ml/Deployment/train"].workload.source == "name"
    assert got["ml/CronJob/nightly"].pods == ("nightly-29412345-bv7kd",)


def test_a_workload_takes_its_pods_largest_peak_and_summed_samples() -> None:
    histories, _ = read_histories(replay(), OPTIONS)
    got = by_name(histories)
    peaks, samples = per_pod("shmguard_shm_peak_bytes"), per_pod("count_over_time")
    limits = per_pod("shmguard_cgroup_memory_limit_bytes")
    train = got["ml/Deployment/train"]
    assert train.pods == ("train-7c9f8b6d5d-qz7wp", "train-7c9f8b6d5d-x2x4k")
    assert train.peak == max(peaks[p] for p in train.pods)
    # what the recorder's sandboxes wrote: 20 MiB and 30 MiB
    assert train.peak == 30 * MiB
    assert train.samples == sum(samples[p] for p in train.pods)
    assert train.memory_limit == limits["train-7c9f8b6d5d-x2x4k"] == 512 * MiB
    assert train.size == 64 * MiB
    assert train.first_seen is not None and train.last_seen is not None
    assert 0 < train.last_seen - train.first_seen <= OPTIONS.window
    assert got["ml/CronJob/nightly"].required == 16 * MiB
    assert got["ml/Pod/scratch"].peak == 0
    # kube-state-metrics' container limit first (the exporters of etl saw no cgroup limit)
    assert train.memory_limit_from == "kube_pod_container_resource_limits"
    etl = got["ml/StatefulSet/etl"]
    assert (etl.memory_limit, etl.memory_limit_from) == (
        2048 * MiB,
        "kube_pod_container_resource_limits",
    )
    resnet = got["ml/Deployment/resnet"]
    assert (resnet.memory_limit, resnet.memory_limit_from) == (
        1024 * MiB,
        "shmguard_cgroup_memory_limit_bytes",
    )
    bert = got["ml/TrainingJob/bert"]
    assert (bert.memory_limit, bert.memory_limit_from) == (None, None)


def test_sizes_follow_from_the_peak_through_the_policy() -> None:
    histories, _ = read_histories(replay(), OPTIONS)
    got = by_name(histories)
    policy = Policy()
    # a 30 MiB peak gives 40 MiB, within the 64 MiB the pod has: the 64 MiB is kept
    train = size_history(got["ml/Deployment/train"], OPTIONS)
    assert shm_size_for(30 * MiB, policy).bytes == 40 * MiB
    assert train.recommendation.shm_size == 64 * MiB and train.shm_change == 0
    # one sentence a user can read (a new user saw the floor's words spliced mid-sentence)
    fits = shm_size_for(30 * MiB, policy, what=f"peak over {RECORDED['window']}").basis
    assert train.recommendation.shm_basis == (
        f"{fits}; the current 64 MiB is kept (a tmpfs holds only the pages written: a smaller "
        "one frees no memory)"
    )
    assert train.recommendation.memory_limit.value == memory_limit_for(
        64 * MiB, policy, current_limit=512 * MiB, current_shm=64 * MiB
    )
    # a /dev/shm that is not a clean size (a host's, half of RAM: 23.54 GiB) is kept to the
    # byte: it was proposed as 24 GiB, a change, beside "the current ~23.54 GiB is kept"
    host = 25_276_116_992
    odd = WorkloadHistory(**{**got["ml/Deployment/train"].__dict__, "size": host})
    kept = size_history(odd, OPTIONS)
    assert kept.recommendation.shm_size == host and kept.shm_change == 0
    assert kept.recommendation.shm_basis.endswith(f"the current {format_iec(host)} is kept "
        "(a tmpfs holds only the pages written: a smaller one frees no memory)")  # fmt: skip
    assert kept.recommendation.memory_limit.value == memory_limit_for(
        host, policy, current_limit=512 * MiB, current_shm=host
    )
    # 120 MiB written into a 128 MiB /dev/shm under a 1 GiB limit: both grow
    resnet = size_history(got["ml/Deployment/resnet"], OPTIONS)
    assert got["ml/Deployment/resnet"].peak == 120 * MiB
    assert resnet.recommendation.shm_size == shm_size_for(120 * MiB, policy).bytes == 160 * MiB
    assert resnet.shm_change == 32 * MiB
    mem = memory_limit_for(160 * MiB, policy, current_limit=1024 * MiB, current_shm=128 * MiB)
    assert resnet.recommendation.memory_limit.value == mem
    assert resnet.memory_change == mem - 1024 * MiB > 0
    assert "leaves 896 MiB beside the current /dev/shm 128 MiB, raised to the 1 GiB margin" in (
        resnet.recommendation.memory_basis
    )
    # the configured need is the floor
    nightly = size_history(got["ml/CronJob/nightly"], OPTIONS)
    assert "configured need" not in nightly.recommendation.shm_basis  # 64 MiB kept is larger
    bigger = WorkloadHistory(**{**got["ml/CronJob/nightly"].__dict__, "required": 100 * MiB})
    floored = size_history(bigger, OPTIONS)
    assert floored.recommendation.shm_size == shm_size_for(8 * MiB, policy, floor=100 * MiB).bytes
    assert "configured need" in floored.recommendation.shm_basis
    # nothing written: no size
    scratch = size_history(got["ml/Pod/scratch"], OPTIONS)
    assert scratch.recommendation.shm_size is None and scratch.recommendation.changes == ()


def test_confidence_counts_samples_against_the_minimum() -> None:
    histories, _ = read_histories(replay(), OPTIONS)
    train = by_name(histories)["ml/Deployment/train"]
    strict = size_history(train, RightsizeOptions(**{**OPTIONS.__dict__, "min_samples": 10**6}))
    assert not strict.enough_history
    assert strict.confidence.startswith(f"not enough history: {train.samples} samples from 2 pods")
    loose = size_history(train, RightsizeOptions(**{**OPTIONS.__dict__, "min_samples": 1}))
    assert loose.enough_history and loose.confidence.startswith(f"{train.samples} samples")
    assert 0 < loose.coverage < 1  # about a minute of data in a 5m window


def test_patches_per_workload_and_the_rows_left_without_one() -> None:
    report = recorded_report(train={"peak": 60 * MiB, "size": 256 * MiB})
    patches, skipped = workload_patches(report)
    by_file = {p.name: yaml.safe_load(p.text) for p in patches}
    assert set(by_file) == {
        "ml-deployment-train.yaml",
        "ml-deployment-resnet.yaml",
        "ml-cronjob-nightly.yaml",
    }
    resnet = by_file["ml-deployment-resnet.yaml"]["spec"]["template"]["spec"]
    assert resnet["volumes"][0]["emptyDir"]["sizeLimit"] == "160Mi"
    spec = by_file["ml-deployment-train.yaml"]["spec"]["template"]
    assert spec["metadata"]["annotations"] == {"shmguard.io/shm-size": "80Mi"}
    (c,) = spec["spec"]["containers"]
    assert c == {
        "name": "trainer",
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        "resources": {"limits": {"memory": "1280Mi"}},
    }
    assert spec["spec"]["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "80Mi"}}
    ]
    # the CronJob keeps its 64 MiB /dev/shm: only its memory limit changes, under jobTemplate
    cron = by_file["ml-cronjob-nightly.yaml"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert cron == {"containers": [{"name": "job", "resources": {"limits": {"memory": "1280Mi"}}}]}
    assert skipped == {
        ("ml/TrainingJob/bert", "pytorch"): "a TrainingJob's pod spec lies in its operator's "
        "replica specs: put the Kubernetes snippet of --json there",
        ("ml/Pod/scratch", "shell"): "no size proposed",
        ("ml/StatefulSet/etl", "worker"): "nothing to change",
        ("research/Pod/debug-pod-x2b4z", "main"): "nothing to change",
        **{
            (workload_name(w), ""): "no pod label: not a Kubernetes workload (use the docker "
            "snippet)"
            for w in report.workloads
            if w.history.workload.source == "instance"
        },
    }
    few = recorded_report(min_samples=10**6)
    assert workload_patches(few)[0] == []


def test_node_mode_rows_resize_the_named_volume_or_get_no_patch() -> None:
    # as the node exporter labels them: no container; the emptyDir's name, or none for a
    # runtime's sandbox /dev/shm
    big = {"peak": 100 * MiB, "size": 64 * MiB, "container": ""}
    report = recorded_report(
        resnet={**big, "volume": "cache-shm", "memory_limit": None},
        train={**big, "volume": ""},
    )
    patches, skipped = workload_patches(report)
    by_file = {p.name: yaml.safe_load(p.text) for p in patches}
    node = by_file["ml-deployment-resnet-cache-shm.yaml"]["spec"]["template"]
    assert node["spec"] == {
        "volumes": [{"name": "cache-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "128Mi"}}]
    }
    assert skipped[("ml/Deployment/train", "")] == (
        "the series names neither a container nor a volume"
    )


def test_json_body_validates_against_its_schema() -> None:
    report = recorded_report(train={"peak": 60 * MiB, "size": 256 * MiB})
    patches, _ = workload_patches(report)
    files = {k: p.name for p in patches for k in p.covers}
    options = RightsizeOptions(**{**OPTIONS.__dict__, "min_samples": 1})
    data = json.loads(json.dumps(envelope("recommend", recommend_body(report, options, files))))
    validator("recommend").validate(data)
    train = next(w for w in data["workloads"] if w["workload"] == "train")
    assert train["recommendation"]["shm_size"] == 80 * MiB
    assert train["patch"] == "ml-deployment-train.yaml"
    assert train["named_by"] == "owner" and train["kind"] == "Deployment"
    assert [s["runtime"] for s in train["recommendation"]["snippets"]][:1] == ["docker"]
    assert any(workload_name(w).startswith("ml/") for w in report.workloads)


def test_prometheus_durations() -> None:
    assert parse_prom_duration("7d") == 7 * 86400
    assert parse_prom_duration("1h30m") == 5400
    assert parse_prom_duration("1w2d") == 9 * 86400
    assert parse_prom_duration("500ms") == 0.5
    for bad in ("", "7days", "30m1h", "0s", "-1d", "1.5h", "d"):
        with pytest.raises(ValueError, match="invalid duration"):
            parse_prom_duration(bad)


def test_answers_that_are_not_an_instant_vector_are_errors() -> None:
    with pytest.raises(PromError, match="not a Prometheus API answer"):
        parse_vector(["x"], "u")
    with pytest.raises(PromError, match="Prometheus answered bad_data: parse error"):
        parse_vector({"status": "error", "errorType": "bad_data", "error": "parse error"}, "u")
    with pytest.raises(PromError, match="not an instant vector"):
        parse_vector({"status": "success", "data": {"resultType": "matrix", "result": []}}, "u")
    assert Owners.from_samples([]).pods == {}


def test_an_error_answer_to_one_query_names_it() -> None:
    """Prometheus can refuse one query of the set (its --query.max-samples or timeout, on the
    heaviest): the error names which, and how to make it lighter."""
    (q,) = [q for q in RECORDED["answers"] if "quantile_over_time" in q]
    too_many = {
        "status": "error",
        "errorType": "execution",
        "error": "query processing would load too many samples into memory in query execution",
    }

    def query(expr: str) -> list[Sample]:
        return parse_vector(too_many if expr == q else RECORDED["answers"][expr], "http://p")

    with pytest.raises(PromError) as err:
        read_histories(query, OPTIONS)
    assert str(err.value) == (
        "http://p: Prometheus answered execution: query processing would load too many "
        "samples into memory in query execution (the quantile query, over 5m; a shorter "
        "--window or --namespace reads fewer samples)"
    )


def test_exporters_with_no_pod_label_are_rows_of_their_own() -> None:
    """Two Docker-style exporters (no namespace/pod/container labels) scraped by one
    Prometheus: one row each, by scrape address, with its own peak (they were one row, the
    larger peak and both exporters' samples summed)."""
    histories, _ = read_histories(replay(), OPTIONS)
    docker = [h for h in histories if h.workload.source == "instance"]
    assert [h.workload.kind for h in docker] == ["instance", "instance"]
    (q,) = [q for q in RECORDED["answers"] if "shmguard_shm_peak_bytes" in q]
    want = {
        r["metric"]["instance"]: float(r["value"][1])
        for r in RECORDED["answers"][q]["data"]["result"]
        if "pod" not in r["metric"]
    }
    assert {h.workload.name: h.peak for h in docker} == want
    # what the recorder's two sandboxes wrote
    assert sorted(want.values()) == [6 * MiB, 40 * MiB]
    assert all(h.pods == () and h.namespace == "" and h.container == "" for h in docker)
    small = size_history(min(docker, key=lambda h: h.peak), OPTIONS)
    assert (
        f"{small.history.samples} samples from the exporter at {small.history.workload.name} "
    ) in small.confidence

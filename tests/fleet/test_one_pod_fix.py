"""One fix plan for a pod: the webhook (its library entry on an AdmissionReview) and
``check --fix`` (its library entry on the pod's YAML) write the same /dev/shm volume, and keep
a Guaranteed pod Guaranteed when they raise a memory limit (issue 19, reproduction 3);
``recommend --manifests`` reads the ``shmguard.io/shm-size`` annotation as both do."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
import yaml
from webhook_helpers import review

from shmguard.fix.k8s import mount_entry
from shmguard.fleet.admission import WebhookOptions, decide_admission
from shmguard.lint.check import CheckOptions, fix_file
from shmguard.lint.proposal import Proposal, apply_proposals
from shmguard.model.fix import Change, Setting
from shmguard.units import GiB, MiB

kv = pytest.importorskip("kubernetes_validate")


def guaranteed_pod(memory: str, **annotations: str) -> dict[str, Any]:
    resources = {"memory": memory, "cpu": "2"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "annotations": annotations},
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "pytorch/pytorch:2.3.0",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": dict(resources), "requests": dict(resources)},
                }
            ]
        },
    }


def webhook(obj: dict[str, Any]) -> dict[str, Any]:
    d = decide_admission(review(obj))
    assert d.action == "inject", d
    out: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), list(d.patch))
    return out


def check_fix(obj: dict[str, Any], *, unsafe: bool = False) -> dict[str, Any]:
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    r = fix_file(data, "pod.yaml", CheckOptions(), unsafe=unsafe)
    assert r.data != data
    again = fix_file(r.data, "pod.yaml", CheckOptions(), unsafe=unsafe)
    assert again.data == r.data
    out: dict[str, Any] = yaml.safe_load(r.data)
    return out


def shm(spec: dict[str, Any]) -> dict[str, Any]:
    c = spec["containers"][0]
    (name,) = [m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (vol,) = [v for v in spec["volumes"] if v["name"] == name]
    return vol  # type: ignore[no-any-return]


def memory(spec: dict[str, Any]) -> tuple[str, str]:
    res = spec["containers"][0]["resources"]
    return res["requests"]["memory"], res["limits"]["memory"]


def test_webhook_and_check_fix_keep_a_guaranteed_pod_guaranteed() -> None:
    obj = guaranteed_pod("8Gi", **{"shmguard.io/raise-memory-limit": "true"})
    hooked, fixed = webhook(obj), check_fix(obj)
    assert shm(hooked["spec"]) == shm(fixed["spec"])
    assert shm(hooked["spec"]) == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"},
    }
    # the webhook raises the limit by the size, and the request with it; check --fix caps
    # the size under the limit instead: both stay requests == limits (Guaranteed)
    assert memory(hooked["spec"]) == ("9Gi", "9Gi")
    assert memory(fixed["spec"]) == ("8Gi", "8Gi")
    for out in (hooked, fixed):
        kv.validate(out, "1.37", strict=True)


def test_a_request_below_the_limit_stays_where_it_is() -> None:
    obj = guaranteed_pod("8Gi", **{"shmguard.io/raise-memory-limit": "true"})
    obj["spec"]["containers"][0]["resources"]["requests"]["memory"] = "6Gi"
    assert memory(webhook(obj)["spec"]) == ("6Gi", "9Gi")


def test_the_json_patch_gives_the_pod_check_fix_writes() -> None:
    # without raise-memory-limit both size the same way (the default, under the limit's
    # margin), so the patched pod and the fixed manifest are the same object
    obj = guaranteed_pod("8Gi")
    hooked, fixed = webhook(obj), check_fix(obj)
    assert hooked["spec"] == fixed["spec"]
    # and with a volume named dshm already taken, both pick the same free name
    taken = guaranteed_pod("8Gi")
    taken["spec"]["volumes"] = [{"name": "dshm", "configMap": {"name": "c"}}]
    hooked, fixed = webhook(taken), check_fix(taken)
    assert hooked["spec"] == fixed["spec"]
    assert shm(fixed["spec"])["name"] == "dshm-1"
    kv.validate(fixed, "1.37", strict=True)


def test_check_fix_raising_a_guaranteed_limit_raises_the_request() -> None:
    # SHM010: a 7.5 GiB /dev/shm beside an 8 GiB limit leaves less than the margin; the
    # unsafe fix raises the limit, and the equal request with it
    obj = guaranteed_pod("8Gi")
    spec = obj["spec"]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "7680Mi"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    requests, limits = memory(check_fix(obj, unsafe=True)["spec"])
    assert requests == limits != "8Gi"
    spec["containers"][0]["resources"]["requests"]["memory"] = "4Gi"
    requests, limits = memory(check_fix(obj, unsafe=True)["spec"])
    assert (requests, limits != "8Gi") == ("4Gi", True)


def test_recommend_manifests_raising_a_guaranteed_limit_raises_the_request() -> None:
    obj = guaranteed_pod("2Gi")
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    changes = (
        Change(Setting.SHM_SIZE, 512 * MiB, ("kubernetes",)),
        Change(Setting.MEMORY_LIMIT, 3 * GiB, ("kubernetes",)),
    )
    p = Proposal("", "Pod", "train", "train", "", changes)
    r = apply_proposals(data, "pod.yaml", [p])
    out = yaml.safe_load(r.data)
    assert memory(out["spec"]) == ("3Gi", "3Gi")
    assert shm(out["spec"]) == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"},
    }
    assert apply_proposals(r.data, "pod.yaml", [p]).data == r.data
    kv.validate(out, "1.37", strict=True)


@pytest.mark.parametrize("sidecar_mounts", [True, False])
def test_both_reuse_the_pods_memory_volume(sidecar_mounts: bool) -> None:
    # a memory emptyDir a sidecar mounts at /dev/shm, or one no container mounts: the
    # webhook (before: it added shmguard-dshm beside an unmounted one) and check --fix
    # (SHM007's fix) both mount it in the ML container, and add no volume
    obj = guaranteed_pod("8Gi")
    spec = obj["spec"]
    spec["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "3Gi"}}]
    side: dict[str, Any] = {"name": "log", "image": "fluent/fluent-bit"}
    if sidecar_mounts:
        side["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
    spec["containers"].append(side)
    hooked, fixed = webhook(obj), check_fix(obj)
    assert hooked["spec"] == fixed["spec"]
    assert fixed["spec"]["volumes"] == spec["volumes"]
    assert fixed["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "shm", "mountPath": "/dev/shm"}
    ]


def reused_pod(size_limit: str | None, **annotations: str) -> dict[str, Any]:
    """An ML container without /dev/shm and a memory emptyDir ``shm0`` (``size_limit``, or
    none) that no container mounts: the plan reuses it (issue 19, inputs e2-e4)."""
    empty_dir = {"medium": "Memory"} | ({"sizeLimit": size_limit} if size_limit else {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {
            "containers": [{"name": "train", "image": "pytorch/pytorch:2.3.0"}],
            "volumes": [{"name": "shm0", "emptyDir": empty_dir}],
        },
    }


def findings(obj: dict[str, Any]) -> list[str]:
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    return [f.code for f in fix_file(data, "pod.yaml", CheckOptions()).remaining.findings]


def test_a_reused_memory_volume_without_a_size_limit_gets_the_size_from_both() -> None:
    # before: the webhook mounted shm0 unsized (its decision said 2Gi, and check on its
    # output reported SHM008), while check --fix mounted it and set sizeLimit: 2Gi (SHM008)
    obj = reused_pod(None, **{"shmguard.io/shm-size": "2Gi"})
    obj["spec"]["containers"].append({"name": "side", "image": "ghcr.io/acme/vllm-worker:1"})
    d = decide_admission(review(obj))
    hooked, fixed = webhook(obj), check_fix(obj)
    assert hooked["spec"] == fixed["spec"]
    assert shm(hooked["spec"]) == {
        "name": "shm0",
        "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"},
    }
    assert "SHM008" not in findings(hooked) and findings(hooked) == findings(fixed)
    assert d.message == (
        "mounted the existing memory volume 'shm0' at /dev/shm for train, side, its sizeLimit "
        "set to 2Gi (shmguard.io/shm-size=2Gi)"
    )
    assert d.record["shm_bytes"] == 2 * GiB
    kv.validate(hooked, "1.37", strict=True)


@pytest.mark.parametrize(
    ("size_limit", "annotations", "decided"),
    [
        ("512Mi", {}, "1Gi (sizing policy default)"),
        ("256Mi", {"shmguard.io/shm-size": "2Gi"}, "2Gi (shmguard.io/shm-size=2Gi)"),
    ],
)
def test_a_reused_volumes_size_limit_is_kept_and_the_decision_says_so(
    size_limit: str, annotations: dict[str, str], decided: str
) -> None:
    # before: both kept the volume's sizeLimit, but the decision said "added /dev/shm 1Gi"
    # (or 2Gi) and its facts 1 GiB (2 GiB): now the size the pod gets, and that it was reused
    obj = reused_pod(size_limit, **annotations)
    d = decide_admission(review(obj))
    hooked, fixed = webhook(obj), check_fix(obj)
    assert hooked["spec"] == fixed["spec"]
    assert shm(hooked["spec"])["emptyDir"]["sizeLimit"] == size_limit
    said = (
        f"mounted the existing memory volume 'shm0' (sizeLimit {size_limit}) at /dev/shm for "
        f"train; {decided} not applied: the volume's sizeLimit is kept"
    )
    assert d.message == said
    assert hooked["metadata"]["annotations"]["shmguard.io/decision"] == said
    assert d.warnings[0].startswith("shmguard: mounted the existing memory volume 'shm0' (s")
    assert "not applied" in d.warnings[0]
    assert d.record["shm_bytes"] == int(size_limit[:-2]) * MiB
    assert [c.value for c in d.changes if c.setting is Setting.SHM_SIZE] == [
        int(size_limit[:-2]) * MiB
    ]
    # a sizeLimit equal to the decided size: reused, said without "not applied"
    same = decide_admission(review(reused_pod("1Gi")))
    assert same.message == (
        "mounted the existing memory volume 'shm0' (sizeLimit 1Gi) at /dev/shm for train "
        "(sizing policy default)"
    )
    audit = decide_admission(review(obj), WebhookOptions(audit=True))
    assert audit.message == f"audit: would mount {said.removeprefix('mounted ')}"


def test_shm001s_fix_names_the_volume_the_plan_writes() -> None:
    # before: SHM001's Kubernetes fix always said `name: dshm`, even where the plan picks
    # dshm-1 (a volume named dshm is taken) or reuses a memory emptyDir
    taken = guaranteed_pod("8Gi")
    taken["spec"]["volumes"] = [{"name": "dshm", "configMap": {"name": "c"}}]
    data = yaml.safe_dump(taken, sort_keys=False).encode()
    (f,) = [f for f in fix_file(data, "pod.yaml", CheckOptions()).applied if f.code == "SHM001"]
    assert f.fix is not None and "Add a volume `{name: dshm-1, emptyDir:" in f.fix.description
    # the ML container mounts shm0 elsewhere (SHM007 leaves it to SHM001), a sidecar mounts
    # it at /dev/shm: the plan reuses shm0, and the fix says so (before: "Add a volume dshm")
    obj = reused_pod("2Gi")
    obj["spec"]["containers"][0]["volumeMounts"] = [{"name": "shm0", "mountPath": "/cache"}]
    side = {"name": "side", "image": "busybox"}
    obj["spec"]["containers"].append(side | {"volumeMounts": [mount_entry("shm0")]})
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    fixes = [
        f.fix for f in fix_file(data, "pod.yaml", CheckOptions()).applied if f.code == "SHM001"
    ]
    assert [(x.title, x.description) for x in fixes if x is not None] == [
        (
            "Mount the memory emptyDir 'shm0' at /dev/shm",
            "Mount the pod's memory-backed emptyDir `shm0` at /dev/shm in the container (its "
            "sizeLimit 2Gi kept).",
        )
    ]


@pytest.mark.parametrize(
    ("annotated", "kept"),
    [("2g", True), ("2gb", True), ("2Gi", True), ("2147483648", True), ("1g", False)],
)
def test_recommend_manifests_reads_the_size_annotation_as_check_fix_does(
    annotated: str, kept: bool
) -> None:
    # the annotation is read by the one parser (units.parse_size_annotation): a `2g` that is
    # the proposed 2 GiB stays as written (it was rewritten to 2Gi, read as a Kubernetes
    # quantity only); one that says another size is set to the proposal
    obj = guaranteed_pod("8Gi", **{"shmguard.io/shm-size": annotated})
    spec = obj["spec"]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    p = Proposal(
        "", "Pod", "train", "train", "", (Change(Setting.SHM_SIZE, 2 * GiB, ("kubernetes",)),)
    )
    out = yaml.safe_load(apply_proposals(data, "pod.yaml", [p]).data)
    assert shm(out["spec"])["emptyDir"]["sizeLimit"] == "2Gi"
    assert out["metadata"]["annotations"]["shmguard.io/shm-size"] == (annotated if kept else "2Gi")
    # and check --fix and the webhook read the same annotation as the same 2 GiB
    fresh = guaranteed_pod("8Gi", **{"shmguard.io/shm-size": annotated})
    if kept:
        assert (
            shm(webhook(fresh)["spec"])
            == shm(check_fix(fresh)["spec"])
            == {
                "name": "dshm",
                "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"},
            }
        )

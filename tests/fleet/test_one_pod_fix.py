"""One fix plan for a pod: the webhook (its library entry on an AdmissionReview) and
``check --fix`` (its library entry on the pod's YAML) write the same /dev/shm volume, and keep
a Guaranteed pod Guaranteed when they raise a memory limit (issue 19, reproduction 3)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
import yaml
from webhook_helpers import review

from shmguard.fleet.admission import decide_admission
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

"""The webhook's decisions (shmguard.fleet.admission), on AdmissionReview fixtures: what is
patched, sized, skipped, warned and annotated; patches applied with the jsonpatch library."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_helpers import review

from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.estimate.policy import Policy
from shmguard.fix.k8s import VOLUME_NAME, pointer
from shmguard.fleet import names
from shmguard.fleet.admission import (
    MAX_CONTAINERS,
    MAX_VOLUMES,
    PodTooLarge,
    ReviewError,
    WebhookOptions,
    admission_error,
    admission_response,
    decide_admission,
)
from shmguard.fleet.sizing import loader_request
from shmguard.lint.check import CheckOptions
from shmguard.lint.config._base import fix_size
from shmguard.sources.workload import Workload
from shmguard.units import GiB, MiB, k8s_quantity_bytes, parse_size_annotation

DEFAULT = fix_size(CheckOptions(), Workload("ml"), None)


def pod(*containers: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", **meta},
        "spec": {"containers": list(containers)},
    }


TRAIN = {"name": "train", "image": "pytorch/pytorch:2.3.0", "command": ["torchrun", "t.py"]}
WEB = {"name": "web", "image": "nginx:1.27"}


def patched(obj: dict[str, Any], options: WebhookOptions | None = None) -> dict[str, Any]:
    d = decide_admission(review(obj), options or WebhookOptions())
    assert all(op["op"] == "add" for op in d.patch)
    return jsonpatch.apply_patch(copy.deepcopy(obj), list(d.patch))  # type: ignore[no-any-return]


def shm_mounts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """container name -> the volume it mounts at /dev/shm."""
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    return {
        c["name"]: vols[m["name"]]
        for c in spec["containers"]
        for m in c.get("volumeMounts", [])
        if m["mountPath"] == "/dev/shm"
    }


def test_default_size_is_check_fixs_and_the_patch_creates_missing_keys() -> None:
    obj = pod(TRAIN, WEB)
    d = decide_admission(review(obj))
    assert d.action == "inject" and d.reason == ""
    assert GiB == DEFAULT
    assert [op["path"] for op in d.patch] == [
        "/spec/volumes",
        "/spec/containers/0/volumeMounts",
        "/metadata/annotations",
    ]
    out = jsonpatch.apply_patch(obj, list(d.patch))
    assert shm_mounts(out["spec"]) == {
        "train": {
            "name": VOLUME_NAME,
            "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"},
        }
    }
    assert out["metadata"]["annotations"][names.DECISION_ANNOTATION] == d.message
    assert d.message == "added /dev/shm 1Gi (sizing policy default) for train"
    assert d.warnings == ("shmguard: added /dev/shm 1Gi for train (sizing policy default)",)
    assert [(c.setting.value, c.value) for c in d.changes] == [("shm-size", GiB)]
    assert d.record["action"] == "inject" and d.record["shm_bytes"] == GiB


def test_second_pass_over_the_patched_pod_adds_nothing() -> None:
    obj = pod(TRAIN, dict(TRAIN, name="sidecar-train"))
    once = patched(obj)
    d = decide_admission(review(once))
    assert d.action == "skip" and d.reason == "already-mounted" and d.patch == ()
    # both ML containers share one volume
    assert set(shm_mounts(once["spec"])) == {"train", "sidecar-train"}
    assert len(once["spec"]["volumes"]) == 1


def test_existing_arrays_get_items_appended_and_names_are_escaped() -> None:
    c = dict(TRAIN, volumeMounts=[{"name": "data", "mountPath": "/data"}])
    obj = pod(c, annotations={"a/b~c": "x"})
    obj["spec"]["volumes"] = [
        {"name": "data", "emptyDir": {}},
        {"name": VOLUME_NAME, "configMap": {"name": "x"}},
    ]
    d = decide_admission(review(obj))
    paths = [op["path"] for op in d.patch]
    assert paths == [
        "/spec/volumes/-",
        "/spec/containers/0/volumeMounts/-",
        "/metadata/annotations/shmguard.io~1decision",
    ]
    out = jsonpatch.apply_patch(obj, list(d.patch))
    assert shm_mounts(out["spec"])["train"]["name"] == f"{VOLUME_NAME}-1"
    assert out["metadata"]["annotations"]["a/b~c"] == "x"
    assert pointer("metadata", "annotations", "a/b~c") == "/metadata/annotations/a~1b~0c"


def test_annotation_size_wins_then_the_model_then_the_default() -> None:
    ann = {names.SHM_SIZE_ANNOTATION: "3Gi", "shmguard.io/dataloader": "num_workers=4"}
    d = decide_admission(review(pod(TRAIN, annotations=ann)))
    assert d.record["shm_bytes"] == 3 * GiB and d.record["source"] == "annotation"
    loader = "num_workers=8,batch_size=64,sample_shape=3x224x224,dtype=float32"
    d = decide_admission(review(pod(TRAIN, annotations={"shmguard.io/dataloader": loader})))
    want = make_plan(PlanRequest(8, batch_size=64, sample_shape=(3, 224, 224)))
    assert want.shm is not None
    assert d.record["shm_bytes"] == want.shm.bytes == 896 * MiB
    assert d.record["source"] == "model"


def test_unreadable_annotations_are_warned_and_fall_back() -> None:
    ann = {names.SHM_SIZE_ANNOTATION: "lots", "shmguard.io/dataloader": "num_workers=x"}
    d = decide_admission(review(pod(TRAIN, annotations=ann)))
    assert d.record["shm_bytes"] == GiB and d.record["source"] == "default"
    assert len(d.warnings) == 3
    assert d.warnings[1].startswith("shmguard: shmguard.io/shm-size='lots' ignored: neither")
    assert "num_workers='x': expected a whole number" in d.warnings[2]
    with pytest.raises(ValueError, match="unknown key 'workers'"):
        loader_request("workers=4")


def test_default_is_capped_by_the_memory_limit_never_the_whole_limit() -> None:
    c = dict(TRAIN, resources={"limits": {"memory": "1536Mi"}})
    d = decide_admission(review(pod(c)))
    # 1.5 GiB limit - 1 GiB margin = 512 MiB, the same cap check --fix uses
    assert d.record["shm_bytes"] == 512 * MiB
    assert d.record["shm_bytes"] == fix_size(CheckOptions(), Workload("ml"), 1536 * MiB)
    small = dict(TRAIN, resources={"limits": {"memory": "1Gi"}})
    d = decide_admission(review(pod(small)))
    assert d.action == "skip" and d.reason == "no-room"
    assert "shmguard.io/raise-memory-limit" in d.message
    # the size decision's "no room" answer: the memory limit the default would need
    assert "(a 1 GiB /dev/shm needs a memory limit of 2Gi)" in d.message


#: A 49.5 GiB predicted peak: a 64 GiB /dev/shm.
BIG_LOADER = (
    "num_workers=16,batch_size=256,sample_shape=3x512x512,dtype=float16,prefetch_factor=4,"
    "persistent_workers=true,loaders=2"
)


def test_batch_bytes_is_read_by_the_one_annotation_parser() -> None:
    # `2g` made the webhook skip the whole annotation (k8s_quantity_bytes) before fix A
    for text, n in (("2g", 2 * GiB), ("2Gi", 2 * GiB), ("2G", 2_000_000_000)):
        assert loader_request(f"num_workers=2,batch_bytes={text}").batch_bytes == n
        ann = {"shmguard.io/dataloader": f"num_workers=2,batch_bytes={text}"}
        d = decide_admission(review(pod(TRAIN, annotations=ann)))
        want = make_plan(PlanRequest(2, batch_bytes=n)).shm
        assert want is not None
        assert (d.record["source"], d.record["shm_bytes"]) == ("model", want.bytes)
        assert not any("ignored" in w for w in d.warnings)
    with pytest.raises(ValueError, match="batch_bytes='1m': m is milli"):
        loader_request("num_workers=2,batch_bytes=1m")


def test_a_model_size_over_the_memory_limit_is_no_room_unless_raising() -> None:
    res = {"limits": {"memory": "16Gi"}, "requests": {"memory": "16Gi"}}
    c = dict(TRAIN, resources=res)
    ann = {"shmguard.io/dataloader": BIG_LOADER}
    d = decide_admission(review(pod(c, annotations=ann)))
    # before fix A: a 64Gi /dev/shm under the 16Gi limit (its own SHM009 policy flags that)
    assert (d.action, d.reason) == ("skip", "no-room")
    assert "a 64 GiB /dev/shm needs a memory limit of 80Gi" in d.message
    assert "sizing model" in d.message
    ann[names.RAISE_MEMORY_ANNOTATION] = "true"
    out = patched(pod(c, annotations=ann))
    assert shm_mounts(out["spec"])["train"]["emptyDir"]["sizeLimit"] == "64Gi"
    # the limit raised to what the decision names, and the equal request with it
    assert out["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "80Gi"},
        "requests": {"memory": "80Gi"},
    }


def test_raise_memory_limit_only_when_asked() -> None:
    c = dict(TRAIN, resources={"limits": {"memory": "8Gi"}, "requests": {"memory": "8Gi"}})
    out = patched(pod(c))
    assert out["spec"]["containers"][0]["resources"]["limits"]["memory"] == "8Gi"
    ann = {names.RAISE_MEMORY_ANNOTATION: "true", names.SHM_SIZE_ANNOTATION: "2Gi"}
    d = decide_admission(review(pod(c, annotations=ann)))
    assert "/spec/containers/0/resources/limits/memory" in [op["path"] for op in d.patch]
    out = patched(pod(c, annotations=ann))
    assert out["spec"]["containers"][0]["resources"]["limits"]["memory"] == "10Gi"
    assert shm_mounts(out["spec"])["train"]["emptyDir"]["sizeLimit"] == "2Gi"
    assert [(ch.setting.value, ch.value) for ch in d.changes] == [
        ("shm-size", 2 * GiB),
        ("memory-limit", 10 * GiB),
    ]
    assert decide_admission(review(out)).patch == ()  # not raised twice


@pytest.mark.parametrize(
    ("obj", "namespace", "reason", "annotated"),
    [
        (pod(TRAIN), "kube-system", "excluded-namespace", False),
        (pod(TRAIN, annotations={"kubernetes.io/config.mirror": "abc"}), "ml", "mirror-pod", False),
        (pod(TRAIN, annotations={names.POD_INJECT_ANNOTATION: "false"}), "ml", "opted-out", True),
        (pod(WEB), "ml", "no-ml-container", True),
        (
            pod(dict(WEB, resources={"limits": {"nvidia.com/gpu": 1}})),
            "ml",
            "no-ml-container",
            True,
        ),
        (
            pod(dict(TRAIN, volumeMounts=[{"name": "x", "mountPath": "/dev/shm/"}])),
            "ml",
            "already-mounted",
            True,
        ),
    ],
)
def test_skips(obj: dict[str, Any], namespace: str, reason: str, annotated: bool) -> None:
    d = decide_admission(review(obj, namespace=namespace))
    assert (d.action, d.reason) == ("skip", reason)
    assert d.record["reason"] == reason and d.record["namespace"] == namespace
    assert bool(d.patch) == annotated and bool(d.warnings) == annotated
    if annotated:
        out = jsonpatch.apply_patch(obj, list(d.patch))
        assert out["metadata"]["annotations"][names.DECISION_ANNOTATION] == d.message
        assert decide_admission(review(out, namespace=namespace)).patch == ()


def test_host_ipc_and_custom_excluded_namespace() -> None:
    obj = pod(TRAIN)
    obj["spec"]["hostIPC"] = True
    assert decide_admission(review(obj)).reason == "host-ipc"
    opts = WebhookOptions(excluded_namespaces=frozenset({"batch"}))
    assert (
        decide_admission(review(pod(TRAIN), namespace="batch"), opts).reason == "excluded-namespace"
    )
    assert decide_admission(review(pod(TRAIN), namespace="kube-system"), opts).action == "inject"


def test_opt_in_annotation_covers_every_main_container() -> None:
    obj = pod(WEB, annotations={names.POD_INJECT_ANNOTATION: "true"})
    assert set(shm_mounts(patched(obj)["spec"])) == {"web"}


def test_workload_annotation_overrides_detection() -> None:
    obj = pod(TRAIN, labels={"shmguard.io/workload": "container"})
    assert decide_admission(review(obj)).reason == "no-ml-container"
    env = dict(WEB, env=[{"name": "NCCL_DEBUG", "value": "INFO"}])
    assert decide_admission(review(pod(env))).action == "inject"


def test_audit_patches_nothing_and_says_what_it_would_do() -> None:
    d = decide_admission(review(pod(TRAIN)), WebhookOptions(audit=True))
    assert d.action == "audit" and d.patch == ()
    assert d.warnings == (
        "shmguard: audit: would add /dev/shm 1Gi for train (sizing policy default)",
    )
    assert d.message.startswith("audit: would add /dev/shm 1Gi")
    d = decide_admission(review(pod(WEB)), WebhookOptions(audit=True))
    assert d.action == "skip" and d.patch == () and d.warnings


def test_memory_backed_dev_shm_of_another_container_is_reused() -> None:
    first = dict(TRAIN, name="a", volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}])
    obj = pod(first, dict(TRAIN, name="b"))
    obj["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    out = patched(obj)
    assert [v["name"] for v in out["spec"]["volumes"]] == ["dshm"]
    assert shm_mounts(out["spec"])["b"]["name"] == "dshm"


def test_not_a_pod_create_is_ignored_and_bad_reviews_raise() -> None:
    r = review(pod(TRAIN), operation="UPDATE")
    d = decide_admission(r)
    assert d.action == "ignore" and d.patch == () and d.uid == r["request"]["uid"]
    assert admission_response(d)["response"] == {"uid": d.uid, "allowed": True}
    for bad in (
        [],
        {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}},
    ):
        with pytest.raises(ReviewError):
            decide_admission(bad)
    err = admission_error("bad", 400)["response"]
    assert err["allowed"] is False and err["status"]["code"] == 400


def test_response_carries_the_base64_patch_and_uid() -> None:
    r = review(pod(TRAIN))
    d = decide_admission(r)
    resp = admission_response(d)
    assert resp["apiVersion"] == "admission.k8s.io/v1" and resp["kind"] == "AdmissionReview"
    body = resp["response"]
    assert body["uid"] == r["request"]["uid"] and body["allowed"] is True
    assert body["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(body["patch"])) == list(d.patch)
    assert all(len(w) <= 256 for w in body["warnings"])


def test_policy_default_from_configuration() -> None:
    opts = WebhookOptions(policy=Policy(default_shm_size=2 * GiB))
    assert decide_admission(review(pod(TRAIN)), opts).record["shm_bytes"] == 2 * GiB


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_KEYS = st.sampled_from(
    [
        "metadata",
        "spec",
        "containers",
        "volumes",
        "volumeMounts",
        "resources",
        "limits",
        "memory",
        "annotations",
        "name",
        "image",
        "env",
        "hostIPC",
        "mountPath",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    obj=st.dictionaries(_KEYS, _JSON | st.dictionaries(_KEYS, _JSON, max_size=4), max_size=5),
    ns=st.text(max_size=5),
)
def test_any_json_object_gets_a_decision_never_an_exception(obj: dict[str, Any], ns: str) -> None:
    r = review({"apiVersion": "v1", "kind": "Pod", **obj}, namespace=ns)
    d = decide_admission(r)
    assert d.uid == r["request"]["uid"] and d.action in ("inject", "skip", "ignore")
    assert all(op["op"] == "add" for op in d.patch)
    json.dumps(admission_response(d))


LIMITED = {**TRAIN, "resources": {"limits": {"memory": "8Gi"}}}


@pytest.mark.parametrize("container", [TRAIN, LIMITED], ids=["no-limit", "8Gi-limit"])
@pytest.mark.parametrize(
    "stated", ["1e999", "100Ei", "1m", "0.5", "1", "1023", "9" * 5000, "9e18", "2Gi"]
)
def test_every_size_written_is_a_valid_quantity_within_the_policy_bounds(
    container: dict[str, Any], stated: str
) -> None:
    obj = pod(container, annotations={names.SHM_SIZE_ANNOTATION: stated})
    d = decide_admission(review(obj))
    spec = patched(obj)["spec"]
    sizes = [v["emptyDir"]["sizeLimit"] for v in spec.get("volumes", [])]
    assert len(sizes) == 1
    n = k8s_quantity_bytes(sizes[0])
    assert MiB <= n <= 2**63 - 1 and len(sizes[0]) <= 20
    if stated in ("9e18", "2Gi"):
        assert n == parse_size_annotation(stated)
        assert not any("ignored" in w for w in d.warnings)
    else:  # ignored with a warning: the next source decides
        assert n == DEFAULT and any(f"{stated[:20]!r}" in w for w in d.warnings)


def test_a_raised_memory_limit_over_8_eib_is_skipped_never_written() -> None:
    big = {**TRAIN, "resources": {"limits": {"memory": "7Ei"}}}
    ann = {names.SHM_SIZE_ANNOTATION: "7Ei", names.RAISE_MEMORY_ANNOTATION: "true"}
    d = decide_admission(review(pod(big, annotations=ann)))
    assert (d.action, d.reason) == ("skip", "invalid-size")
    assert "over the 8 EiB (2^63 - 1 bytes) a Kubernetes quantity holds" in d.message
    assert all("resources" not in op["path"] and "volumes" not in op["path"] for op in d.patch)


def test_a_pod_create_without_an_object_says_so() -> None:
    r = review(pod(TRAIN))
    del r["request"]["object"]
    d = decide_admission(r)
    assert (d.action, d.message) == ("ignore", "a Pod CREATE without an object")


@pytest.mark.parametrize(
    ("kind", "operation", "message"),
    [
        # A Pod of another API group was "not a Pod CREATE (Pod CREATE)".
        ({"group": "example.io", "version": "v1", "kind": "Pod"}, "CREATE",
         "not a Pod CREATE (example.io/Pod CREATE)"),
        ({"group": "", "version": "v1", "kind": "Pod"}, "UPDATE", "not a Pod CREATE (Pod UPDATE)"),
        ({"group": "apps", "version": "v1", "kind": "Deployment"}, "CREATE",
         "not a Pod CREATE (apps/Deployment CREATE)"),
    ],
)  # fmt: skip
def test_a_request_that_is_not_a_pod_create_says_what_it_is(
    kind: dict[str, str], operation: str, message: str
) -> None:
    r = review(pod(TRAIN))
    r["request"]["kind"], r["request"]["operation"] = kind, operation
    d = decide_admission(r)
    assert (d.action, d.message, d.patch) == ("ignore", message, ())
    # a null group is the core group, as the API server's ""
    r = review(pod(TRAIN))
    r["request"]["kind"] = {"group": None, "version": "v1", "kind": "Pod"}
    assert decide_admission(r).action != "ignore"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            {"containers": [TRAIN] * (MAX_CONTAINERS - 10), "initContainers": [WEB] * 11},
            "257 containers",
        ),
        ({"containers": [TRAIN], "volumes": [{"name": "v"}] * (MAX_VOLUMES + 1)}, "1025 volumes"),
        (
            {"containers": [{**TRAIN, "volumeMounts": [{"name": "v"}] * (MAX_VOLUMES + 1)}]},
            "1025 volumes or volume mounts",
        ),
    ],
    ids=["containers", "volumes", "mounts"],
)
def test_a_pod_over_the_caps_is_refused(spec: dict[str, Any], words: str) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    with pytest.raises(PodTooLarge, match=words) as err:
        decide_admission(review(obj))
    assert err.value.code == 413
    at_cap = {"containers": [TRAIN] * MAX_CONTAINERS, "volumes": [{"name": "v"}] * MAX_VOLUMES}
    obj["spec"] = at_cap
    assert decide_admission(review(obj)).action == "inject"


@pytest.mark.parametrize(
    "memory", ["1e999", "9" * 4000, int("9" * 4000), "100Ei"], ids=["1e999", "str", "int", "100Ei"]
)
def test_a_memory_limit_over_8_eib_is_unreadable_never_an_exception(memory: object) -> None:
    ann = {names.RAISE_MEMORY_ANNOTATION: "true"}
    c = {**TRAIN, "resources": {"limits": {"memory": memory}}}
    d = decide_admission(review(pod(c, annotations=ann)))
    assert d.action == "inject" and "no memory limit to raise" in d.message
    assert not any("resources" in op["path"] for op in d.patch)


@pytest.mark.parametrize(
    ("limit", "words"),
    [
        ("1m", "the sizeLimit of the memory volume 'scratch', 1 B, is below the least, 1 MiB"),
        ("1e999", "the sizeLimit of the memory volume 'scratch' is not a Kubernetes quantity"),
        ("9" * 4000, "the sizeLimit of the memory volume 'scratch' is not a Kubernetes quantity"),
    ],
    ids=["1m", "1e999", "4000-digits"],
)
def test_a_reused_memory_volume_must_have_a_usable_size_limit(limit: str, words: str) -> None:
    vol = {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": limit}}
    obj = pod(TRAIN)
    obj["spec"]["volumes"] = [vol]
    d = decide_admission(review(obj))
    assert (d.action, d.reason) == ("skip", "invalid-size")
    assert words in d.message and len(d.message) < 200
    assert all(op["path"].startswith("/metadata") for op in d.patch)

"""A pod template inside an item of a ``kind: List`` (kubectl get -o yaml) keeps its
annotations, as the same object in its own document does."""

from __future__ import annotations

import yaml

from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes
from shmguard.sources.yamlnode import YScalar

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "serve", "namespace": "ml"},
    "spec": {
        "template": {
            "metadata": {"annotations": {"shmguard.io/ignore": "SHM001", "team": "a"}},
            "spec": {"containers": [{"name": "v", "image": "vllm/vllm-openai:v0.6.0"}]},
        }
    },
}


def _list(*items: object) -> bytes:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}).encode()


def test_template_annotations_of_a_list_item() -> None:
    other = {**DEPLOY, "metadata": {"name": "other"}}
    lf = load_bytes(_list(other, DEPLOY), "list.yaml")
    pod = lf.pod_specs[1]
    assert pod.path == "items[1].spec.template.spec"
    ann = {k: v.value for k, v in pod.annotations.items() if isinstance(v, YScalar)}
    assert ann == {"shmguard.io/ignore": "SHM001", "team": "a"}


def test_ignore_annotation_in_a_list_item_suppresses() -> None:
    alone = check_loaded(load_bytes(yaml.safe_dump(DEPLOY).encode(), "d.yaml"))
    listed = check_loaded(load_bytes(_list(DEPLOY), "list.yaml"))
    assert [f.code for f in alone.findings] == [f.code for f in listed.findings] == []
    bare = {**DEPLOY, "spec": {"template": {"spec": DEPLOY["spec"]["template"]["spec"]}}}
    assert [f.code for f in check_loaded(load_bytes(_list(bare), "l.yaml")).findings] == ["SHM001"]


def _owned(kind: str, name: str, owner: dict[str, str] | None, spec: object) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True, "apiVersion": "apps/v1"}]
    return {
        "apiVersion": "apps/v1" if kind != "Pod" else "v1",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
    }


def test_kubectl_get_all_reports_a_workload_once_on_its_controller() -> None:
    # `kubectl get all -o yaml` lists a Deployment, its ReplicaSet and the ReplicaSet's Pod, all
    # with the same pod template: a new user saw one missing /dev/shm reported three times.
    pod_spec = {"containers": [{"name": "v", "image": "vllm/vllm-openai:v0.6.0"}]}
    template = {"spec": {"template": {"spec": pod_spec}}}
    deploy = _owned("Deployment", "serve", None, template["spec"])
    rs = _owned(
        "ReplicaSet",
        "serve-7d9",
        {"kind": "Deployment", "name": "serve", "uid": "uid-serve"},
        template["spec"],
    )
    pod = _owned("Pod", "serve-7d9-x2", {"kind": "ReplicaSet", "name": "serve-7d9"}, pod_spec)
    got = check_loaded(load_bytes(_list(pod, rs, deploy), "all.yaml"))
    assert [(f.code, (f.location.path or "").split(".")[0]) for f in got.findings] == [
        ("SHM001", "items[2]")
    ]
    # the Pod alone (its ReplicaSet not in the stream) is still checked
    alone = check_loaded(load_bytes(_list(pod), "pods.yaml"))
    assert [f.code for f in alone.findings] == ["SHM001"]

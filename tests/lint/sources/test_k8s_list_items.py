"""A pod template inside an item of a ``kind: List`` (kubectl get -o yaml) keeps its
annotations, as the same object in its own document does."""

from __future__ import annotations

import yaml

from shmguard.lint.check import check_loaded
from shmguard.lint.sources.load import load_bytes
from shmguard.lint.sources.yamlnode import YScalar

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

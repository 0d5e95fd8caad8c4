"""The search for pod specs in objects of unknown kinds (``k8s._fallback``): found wherever a
``containers`` key can come from (merge keys, anchors in other list items, escaped keys), and
a large object never stops the file loading."""

from __future__ import annotations

from shmguard.lint.check import check_loaded
from shmguard.sources.k8s import FALLBACK_NODES
from shmguard.sources.load import load_bytes
from shmguard.sources.yamlload import MAX_EXPANDED

HEAD = "apiVersion: example.com/v1\nkind: Trainer\nmetadata: {name: t}\n"
POD = "{containers: [{name: main, image: pytorch/pytorch:2.3}]}"


def _pods(text: str) -> list[tuple[str, list[str]]]:
    lf = load_bytes(text.encode(), "x.yaml")
    assert lf.kind == "kubernetes" and not lf.diagnostics
    return [(p.path, [c.name for c in p.containers]) for p in lf.pod_specs]


def test_plain_nested_and_absent() -> None:
    assert _pods(HEAD + f"spec:\n  runner:\n    template:\n      spec: {POD}\n") == [
        ("spec.runner.template.spec", ["main"])
    ]
    assert _pods(HEAD + "spec:\n  replicas: 2\n  note: no pods here\n") == []


def test_containers_through_a_merge_key_or_an_alias() -> None:
    merged = HEAD + f"x-pod: &pod {POD}\nspec:\n  worker:\n    <<: *pod\n    hostIPC: false\n"
    assert ("spec.worker", ["main"]) in _pods(merged)
    # a List whose second item uses an anchor defined in the first
    listed = (
        "apiVersion: v1\nkind: List\nitems:\n"
        f"- {{apiVersion: example.com/v1, kind: A, metadata: {{name: a}}, spec: &s {POD}}}\n"
        "- {apiVersion: example.com/v1, kind: B, metadata: {name: b}, spec: *s}\n"
    )
    assert [c for _, c in _pods(listed)] == [["main"], ["main"]]


def test_containers_written_with_an_escape() -> None:
    escaped = HEAD + 'spec:\n  "contai\\x6eers": [{name: main, image: pytorch/pytorch}]\n'
    assert _pods(escaped) == [("spec", ["main"])]


def test_an_object_past_the_node_limit_still_loads_and_checks() -> None:
    # aliases expanding to about 300,000 nodes: under the loader's alias-bomb limit, over the
    # fallback's; this used to raise ValueError out of load_bytes
    bulk = "bulk: &b [" + ",".join(["1"] * 2000) + "]\n"
    refs = "".join(f"  k{i}: *b\n" for i in range(150))
    assert FALLBACK_NODES < 150 * 2000 < MAX_EXPANDED
    for spec in ("", f"  template: {{spec: {POD}}}\n"):
        text = HEAD + bulk + "spec:\n" + spec + refs
        lf = load_bytes(text.encode(), "big.yaml")
        assert lf.kind == "kubernetes" and not lf.diagnostics
        found = [p.path for p in lf.pod_specs]
        assert found == (["spec.template.spec"] if spec else [])
        assert check_loaded(lf).diagnostics == ()


def test_a_containers_key_without_a_list_of_mappings_is_no_pod() -> None:
    schema = (
        "spec:\n  containers: {type: array, items: {type: object}}\n  c2:\n    containers: []\n"
    )
    assert _pods(HEAD + schema) == []
    aliased = HEAD + "x: &c {name: main, image: pytorch/pytorch:2.3}\nspec:\n  containers: [*c]\n"
    assert _pods(aliased) == [("spec", ["main"])]

"""Every pod template of ../shared/corpus/k8s, sent to the real webhook as the API server
would: an AdmissionReview v1 over TLS on loopback. Each returned patch is applied with the
jsonpatch library; a patched pod validates against the Kubernetes 1.37 schema
(kubernetes-validate, strict) whenever the pod as written did; a second pass over the patched
pod returns no patch; audit mode patches nothing and warns about the same pods."""

from __future__ import annotations

import base64
import copy
import http.client
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from webhook_helpers import post, review

from shmguard.fleet import names
from shmguard.fleet.webhook import WebhookServer
from shmguard.lint.sources.discover import discover
from shmguard.lint.sources.k8s_model import text
from shmguard.lint.sources.load import load_path

kv = pytest.importorskip("kubernetes_validate")

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(
    not (CORPUS / "k8s").is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
K8S = "1.37"


def at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        name, _, idx = part.partition("[")
        if name:
            obj = obj[name]
        if idx:
            obj = obj[int(idx.rstrip("]"))]
    return obj


def corpus_pods() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, Pod) for every pod template the k8s source finds in the corpus: the template's
    spec with its object's and template's labels and annotations (as ``check`` merges them)."""
    for f in discover([str(CORPUS / "k8s")]):
        lf = load_path(f)
        if not lf.pod_specs:
            continue
        try:
            docs = list(yaml.safe_load_all(Path(f).read_text()))
        except yaml.YAMLError:
            continue
        for i, ps in enumerate(lf.pod_specs):
            doc = docs[ps.obj.doc]
            spec = at(doc, ps.path)
            meta: dict[str, Any] = {"name": f"p{i}"}
            for key, src in (("labels", ps.labels), ("annotations", ps.annotations)):
                vals = {k: v for k, n in src.items() if isinstance(v := text(n), str)}
                if vals:
                    meta[key] = vals
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
            # dates and other YAML-only values become strings, as kubectl would send them
            yield f"{f}:{ps.path}", json.loads(json.dumps(pod, default=str))


def valid(pod: dict[str, Any]) -> bool:
    try:
        kv.validate(pod, K8S, strict=True)
    except (kv.ValidationError, kv.SchemaNotFoundError, kv.InvalidSchemaError):
        return False
    return True


def ask(
    conn: http.client.HTTPSConnection, pod: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    r = review(pod)
    status, body = post(conn, json.dumps(r).encode())
    assert status == 200 and isinstance(body, dict), body
    resp = body["response"]
    assert resp["uid"] == r["request"]["uid"] and resp["allowed"] is True
    patch = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
    assert resp.get("patchType", "JSONPatch") == "JSONPatch"
    assert all(op["op"] == "add" for op in patch)
    return patch, resp.get("warnings", [])


@pytest.mark.slow
def test_every_corpus_pod_template(
    serve: Callable[..., WebhookServer],
    connect: Callable[[WebhookServer], http.client.HTTPSConnection],
) -> None:
    server, auditor = serve(), serve(webhook=_audit())
    conn, audit_conn = connect(server), connect(auditor)
    seen = injected = checked = 0
    for where, pod in corpus_pods():
        seen += 1
        patch, warnings = ask(conn, pod)
        audit_patch, audit_warnings = ask(audit_conn, pod)
        assert audit_patch == [], where
        out = jsonpatch.apply_patch(copy.deepcopy(pod), patch)
        if any(op["path"].startswith("/spec/") for op in patch):
            injected += 1
            assert warnings[0].startswith("shmguard: added /dev/shm"), (where, warnings)
            assert audit_warnings[0].startswith("shmguard: audit: would add"), where
            assert out["metadata"]["annotations"][names.DECISION_ANNOTATION].startswith("added")
            shm = [
                m
                for c in out["spec"]["containers"]
                for m in c.get("volumeMounts", [])
                if m["mountPath"] == "/dev/shm"
            ]
            vols = {v["name"]: v for v in out["spec"]["volumes"]}
            assert all(vols[m["name"]]["emptyDir"]["medium"] == "Memory" for m in shm), where
            if valid(pod):
                checked += 1
                kv.validate(out, K8S, strict=True)
        again, _ = ask(conn, out)
        assert again == [], (where, again)
    # 908 pod templates (tests/lint/sources/test_sources_corpus.py); 130 get a /dev/shm: the
    # containers check's SHM001 flags, plus the Ray containers check leaves to the KubeRay
    # operator (whose pods reach the webhook with the operator's volume already mounted) and
    # MPIJob launchers (docs/webhook.md); 113 of them validated as written, and still do
    assert seen == 908
    assert (injected, checked) == (130, 113)


def _audit() -> Any:
    from shmguard.fleet.admission import WebhookOptions

    return WebhookOptions(audit=True)

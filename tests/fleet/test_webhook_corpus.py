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
from collections.abc import Callable
from typing import Any

import jsonpatch
import pytest
from webhook_helpers import CORPUS, corpus_pods, post, review

from shmguard.fleet import names
from shmguard.fleet.admission import WebhookOptions
from shmguard.fleet.webhook import WebhookServer

kv = pytest.importorskip("kubernetes_validate")

pytestmark = pytest.mark.skipif(
    not (CORPUS / "k8s").is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
K8S = "1.37"


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
    server, auditor = serve(), serve(webhook=WebhookOptions(audit=True))
    conn, audit_conn = connect(server), connect(auditor)
    seen = injected = checked = reused = 0
    for where, pod in corpus_pods():
        seen += 1
        patch, warnings = ask(conn, pod)
        audit_patch, audit_warnings = ask(audit_conn, pod)
        assert audit_patch == [], where
        out = jsonpatch.apply_patch(copy.deepcopy(pod), patch)
        if any(op["path"].startswith("/spec/") for op in patch):
            injected += 1
            # a new volume is "added", a pod's memory emptyDir reused is "mounted" (issue 19)
            done = ("added /dev/shm", "mounted the existing memory volume")
            assert warnings[0].startswith(tuple(f"shmguard: {d}" for d in done)), where
            would = ("audit: would add /dev/shm", "audit: would mount the existing")
            assert audit_warnings[0].startswith(tuple(f"shmguard: {w}" for w in would)), where
            decision = out["metadata"]["annotations"][names.DECISION_ANNOTATION]
            assert decision.startswith(done), where
            reused += decision.startswith(done[1])
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
    # 908 pod templates (tests/sources/test_sources_corpus.py); 130 get a /dev/shm: the
    # containers check's SHM001 flags, plus the Ray containers check leaves to the KubeRay
    # operator (whose pods reach the webhook with the operator's volume already mounted) and
    # MPIJob launchers (docs/webhook.md); 113 of them validated as written, and still do;
    # 1 (aibrix's) reuses the pod's memory emptyDir shared-mem, which had no sizeLimit: it gets one.
    # 5 more (130 -> 125, 113 -> 108 validated) are left alone as no-shm-need: single-GPU (or
    # GPU-less) PyTorch workers whose command says --workers=0 / --num_workers=0, the 5 that
    # check's SHM001 reports at info only (aws-do-eks classy-vision and imagenet-gpu, the two
    # hyperpod task-governance imagenet jobs, training-operator's elastic imagenet)
    assert seen == 908
    assert (injected, checked, reused) == (125, 108, 1)

"""deploy/webhook, the webhook's kustomize base: Kubernetes' own objects validate against the
1.37 schema (kubernetes-validate, strict), cert-manager's (no schema bundled) have the
structure cert-manager needs, the safe defaults and shared names are what docs/webhook.md
says, `shmguard check` finds nothing, and the matchConditions' CEL expressions compile and
select the pods they are meant to (evaluated with the `cel` package over the corpus pods)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from shmguard.fleet import names
from shmguard.fleet.pods import as_map
from shmguard.sources.k8s_model import GPU_RESOURCES

BASE = Path(__file__).resolve().parents[2] / "deploy" / "webhook"
NS = "shmguard-system"


def objects() -> list[dict[str, Any]]:
    kust = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    out = []
    for res in kust["resources"]:
        out += [d for d in yaml.safe_load_all((BASE / res).read_text()) if d]
    return out


def one(kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objects() if o["kind"] == kind]
    return obj


def test_kustomization_lists_every_file_and_one_namespace() -> None:
    kust = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    files = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kust["resources"]) == sorted(files)
    assert kust["namespace"] == NS
    kinds = sorted(o["kind"] for o in objects())
    assert kinds == [
        "Certificate",
        "Deployment",
        "Issuer",
        "MutatingWebhookConfiguration",
        "Namespace",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    cluster_scoped = (
        "Namespace",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    for o in objects():
        if o["kind"] not in cluster_scoped:
            assert o["metadata"]["namespace"] == NS, o["kind"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")
def test_kubectl_kustomize_renders_the_same_objects() -> None:
    r = subprocess.run(
        ["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rendered) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objects()
    )
    for o in rendered:
        assert o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "shmguard"


def test_kubernetes_objects_validate_against_1_37() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    checked = []
    for o in objects():
        if o["apiVersion"].startswith("cert-manager.io/"):
            continue
        kv.validate(o, "1.37", strict=True)
        checked.append(o["kind"])
    assert len(checked) == 8


def test_cert_manager_objects_have_what_cert_manager_needs() -> None:
    # cert-manager.io/v1 CRDs are not in kubernetes-validate: check the fields by hand
    # (cert-manager.io/docs/reference/api-docs: CertificateSpec, IssuerSpec)
    issuer, cert = one("Issuer"), one("Certificate")
    assert issuer["apiVersion"] == cert["apiVersion"] == "cert-manager.io/v1"
    assert issuer["spec"] == {"selfSigned": {}}
    spec = cert["spec"]
    assert spec["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    svc = one("Service")["metadata"]["name"]
    assert spec["dnsNames"] == [f"{svc}.{NS}.svc", f"{svc}.{NS}.svc.cluster.local"]
    assert set(spec) <= {
        "secretName",
        "duration",
        "renewBefore",
        "dnsNames",
        "privateKey",
        "issuerRef",
    }
    mwc = one("MutatingWebhookConfiguration")
    inject = mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert inject == f"{NS}/{cert['metadata']['name']}"
    dep = one("Deployment")["spec"]["template"]["spec"]
    (vol,) = dep["volumes"]
    assert vol["secret"]["secretName"] == spec["secretName"]


def test_safe_defaults_and_shared_names() -> None:
    mwc = one("MutatingWebhookConfiguration")
    assert mwc["metadata"]["name"] == names.WEBHOOK_CONFIGURATION
    (hook,) = mwc["webhooks"]
    assert hook["name"] == names.WEBHOOK_NAME
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 3 and hook["admissionReviewVersions"] == ["v1"]
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    sel = hook["namespaceSelector"]
    assert sel["matchLabels"] == {names.NAMESPACE_LABEL: names.NAMESPACE_LABEL_VALUE}
    svc = one("Service")
    assert hook["clientConfig"]["service"] == {
        "namespace": NS,
        "name": svc["metadata"]["name"],
        "path": "/mutate",
        "port": svc["spec"]["ports"][0]["port"],
    }
    # the webhook's own namespace is never sent to it
    assert one("Namespace")["metadata"]["labels"][names.NAMESPACE_LABEL] != "enabled"


def test_deployment_two_replicas_non_root_read_only_probes_and_no_api_access() -> None:
    dep = one("Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert one("ServiceAccount")["automountServiceAccountToken"] is False
    assert not [o for o in objects() if o["kind"] in ("Role", "ClusterRole", "RoleBinding")]
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]
    cmd = c["command"]
    assert cmd[:2] == ["shmguard", "webhook"]
    assert cmd[cmd.index("--listen") + 1] == f":{c['ports'][0]['containerPort']}"
    mount = c["volumeMounts"][0]["mountPath"]
    assert cmd[cmd.index("--tls-cert") + 1] == f"{mount}/tls.crt"
    assert cmd[cmd.index("--tls-key") + 1] == f"{mount}/tls.key"
    pdb = one("PodDisruptionBudget")["spec"]
    assert pdb["minAvailable"] == 1
    assert (
        pdb["selector"]
        == dep["spec"]["selector"]
        == {"matchLabels": one("Service")["spec"]["selector"]}
    )


def test_shmguard_check_finds_nothing() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--json", str(BASE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    files = json.loads(r.stdout)["files"]
    assert len(files) == 9
    assert all(f["findings"] == [] and f["diagnostics"] == [] for f in files)


def _wants(pod: dict[str, Any]) -> bool:
    """What the matchConditions mean, in Python."""
    ann = as_map(as_map(pod.get("metadata")).get("annotations"))
    if ann.get(names.POD_INJECT_ANNOTATION) == "false":
        return False
    gpu = any(
        g in as_map(as_map(c.get("resources")).get(part))
        for c in pod["spec"].get("containers", [])
        for part in ("limits", "requests")
        for g in GPU_RESOURCES
    )
    return gpu or ann.get(names.POD_INJECT_ANNOTATION) == "true"


def test_match_conditions_compile_and_select_gpu_or_opted_in_pods() -> None:
    cel = pytest.importorskip("cel")
    from webhook_helpers import CORPUS, corpus_pods

    (hook,) = one("MutatingWebhookConfiguration")["webhooks"]
    exprs = [m["expression"] for m in hook["matchConditions"]]
    for e in exprs:
        cel.compile(e)
    for g in GPU_RESOURCES:
        assert f"'{g}'" in exprs[0]
    made = [
        {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}},
        {"metadata": {"annotations": {"shmguard.io/inject": "true"}}, "spec": {"containers": [{}]}},
        {
            "metadata": {"annotations": {"shmguard.io/inject": "false"}},
            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        },
        {"metadata": {}, "spec": {"containers": [{"resources": {"requests": {"amd.com/gpu": 1}}}]}},
    ]
    corpus = [p for _, p in corpus_pods()] if (CORPUS / "k8s").is_dir() else []
    # a Pod always has containers (the API server requires them); Argo templates and TrainJob
    # trainers in the corpus are not Pods yet
    pods = made + [p for p in corpus if isinstance(p["spec"].get("containers"), list)]
    chosen = 0
    for pod in pods:
        got = all(cel.evaluate(e, {"object": pod}) for e in exprs)
        assert got == _wants(pod), pod
        chosen += got
    assert [all(cel.evaluate(e, {"object": p}) for e in exprs) for p in made] == [
        False,
        True,
        False,
        True,
    ]
    if corpus:  # ../shared/corpus beside the checkout: some of its pods request GPUs
        assert chosen > 2

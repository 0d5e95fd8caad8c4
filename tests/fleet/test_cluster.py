"""check --cluster through the real kubernetes client against a loopback API server serving
corpus manifests, and check - on a kubectl List: the same findings as check on the files,
located at cluster://..., with the pods the shmguard webhook sizes reported as covered."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from loopback_api import Cluster, serve
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.fleet import cluster as cluster_mod
from shmguard.fleet.cluster import KINDS
from shmguard.lint.check import check_loaded
from shmguard.sources.k8s_model import GPU_RESOURCES
from shmguard.sources.load import load_bytes

pytest.importorskip("kubernetes")

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "k8s"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
SERVED = {(g, f"{g}/{v}" if g else v, k) for g, v, _, k, _ in KINDS}
WEBHOOK = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "shmguard"},
    "webhooks": [
        {
            "name": "shm.shmguard.io",
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", "kube-public", "kube-node-lease"],
                    }
                ]
            },
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"name": "shmguard", "namespace": "shmguard"}},
        }
    ],
}
NAMESPACES = {"ml": {"shmguard.io/inject": "enabled"}, "research": {}}


#: Every STRIDE-th object of the corpus is served (a spread over its projects, with some
#: dozen SHM001 findings in each namespace).
STRIDE = 3
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _corpus_objects() -> list[dict[str, Any]]:
    """Objects of served kinds from the corpus (files under 64 KiB: not CRD schemas), in ml
    and research by turns, with the metadata and status an API server adds."""
    out: list[dict[str, Any]] = []
    seen = 0
    for path in sorted(CORPUS.rglob("*.yaml")):
        if path.stat().st_size > 64 * 1024:
            continue
        try:
            docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for d in docs:
            if not isinstance(d, dict) or not isinstance(d.get("metadata"), dict):
                continue
            api = d.get("apiVersion")
            if not isinstance(api, str) or (api.rpartition("/")[0], api, d.get("kind")) not in (
                SERVED
            ):
                continue
            try:
                json.dumps(d)
            except (TypeError, ValueError):
                continue
            if not isinstance(d["metadata"].get("name"), str):
                continue
            seen += 1
            if seen % STRIDE:
                continue
            o = copy.deepcopy(d)
            ns = ("ml", "research")[len(out) % 2]
            o["metadata"].update(
                namespace=ns,
                uid=f"uid-{len(out)}",
                resourceVersion=str(1000 + len(out)),
                name=f"{o['metadata']['name']}-{len(out)}",
                managedFields=[{"manager": "kubectl", "operation": "Update"}],
            )
            o["metadata"].setdefault("annotations", {})
            if not isinstance(o["metadata"]["annotations"], dict):
                o["metadata"]["annotations"] = {}
            o["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = (
                json.dumps(d)
            )
            o["status"] = {"observedGeneration": 1}
            out.append(o)
    return out


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    objs = _corpus_objects()
    assert len(objs) > 100
    owned = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "owned-by-a-job",
            "namespace": "research",
            "ownerReferences": [{"kind": "Job", "name": "x", "controller": True, "uid": "1"}],
        },
        "spec": {
            "containers": [{"name": "t", "image": "pytorch/pytorch", "command": ["torchrun"]}]
        },
    }
    opted_out = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "opted-out", "namespace": "ml"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"shmguard.io/inject": "false"}},
                "spec": {"containers": [{"name": "t", "image": "vllm/vllm-openai"}]},
            }
        },
    }
    gpu = {"name": "t", "image": "pytorch/pytorch", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    gpu_deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gpu-train", "namespace": "ml", "uid": "uid-gpu-d"},
        "spec": {"template": {"spec": {"containers": [gpu]}}},
    }
    gpu_pod = {  # a bare pod the API server holds: admitted already
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-notebook", "namespace": "ml", "uid": "uid-gpu-p"},
        "spec": {"containers": [gpu]},
    }
    return [*objs, owned, opted_out, gpu_deployment, gpu_pod]


def _file_findings(obj: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """check's findings on the object written as a file: (code, message, YAML path)."""
    clean = {k: v for k, v in obj.items() if k != "status"}
    data = yaml.safe_dump(clean, sort_keys=False).encode()
    r = check_loaded(load_bytes(data, "obj.yaml"))
    return [(f.code, f.message, f.location.path if f.location else None) for f in r.findings]


def _gpu(o: dict[str, Any]) -> bool:
    """Whether an accelerator appears as a resource key (limits or requests) in ``o``."""
    text = json.dumps(o)
    return any(f'"{g}":' in text for g in GPU_RESOURCES)


def _run(args: list[str], conf: Path, **kw: Any) -> Any:
    return CliRunner().invoke(app, args, env={"KUBECONFIG": str(conf)}, **kw)


def _uri(o: dict[str, Any], context: str = "loopback") -> str:
    m = o["metadata"]
    return f"cluster://{context}/{m['namespace']}/{o['kind']}/{m['name']}"


def test_all_namespaces_same_findings_as_files_and_covered(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    api = Cluster(objects, NAMESPACES, WEBHOOK)
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "-A", "--json"], conf)
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    files = {f["file"]: f for f in doc["files"]}
    expected = [o for o in objects if o["metadata"]["name"] != "owned-by-a-job"]
    assert set(files) == {_uri(o) for o in expected}
    covered = kept = admitted = 0
    for o in expected:
        got = files[_uri(o)]["findings"]
        want = _file_findings(o)
        assert [(f["code"], f["location"]["path"]) for f in got] == [(c, p) for c, _, p in want]
        for f, (_, msg, _) in zip(got, want, strict=True):
            assert f["location"]["line"] is None and f["location"]["file"] == _uri(o)
            if f["fix"] is not None:  # shown, never applied: no edits into the checked text
                assert f["fix"]["edits"] == [] and f["fix"]["applicability"] == "display-only"
            if f["message"] == msg:
                kept += f["code"] == "SHM001"
                continue
            if o["kind"] == "Pod":  # admitted already: the webhook did not size it
                admitted += 1
                assert f["severity"] == "warning" and o["metadata"]["namespace"] == "ml"
                assert f["message"] == (
                    f"{msg}; the shmguard webhook covers it (namespace ml is labelled "
                    "shmguard.io/inject=enabled and the pod requests a GPU) but this pod was "
                    "admitted without a /dev/shm "
                    "(created before the webhook, or the webhook did not answer): recreate it"
                )
                continue
            covered += 1
            assert f["code"] == "SHM001" and f["severity"] == "info"
            assert f["message"] == (
                f"{msg}; covered by the shmguard webhook (namespace ml is labelled "
                "shmguard.io/inject=enabled and the pod requests a GPU): its pods get a sized "
                "/dev/shm at admission"
            )
            assert o["metadata"]["namespace"] == "ml" and _gpu(o)
    assert covered >= 2 and kept >= 5 and admitted >= 1
    # the shipped matchConditions send only pods with a GPU request (or inject: "true"):
    # an ML workload without one in a labelled namespace is not covered
    cpu_only = [
        f
        for o in expected
        if o["metadata"]["namespace"] == "ml" and not _gpu(o)
        for f in files[_uri(o)]["findings"]
        if f["code"] == "SHM001" and "with no volume at /dev/shm" in f["message"]
    ]
    assert cpu_only and all(f["severity"] == "warning" for f in cpu_only)
    assert not any("covered" in f["message"] for f in cpu_only)
    opted = files["cluster://loopback/ml/Deployment/opted-out"]["findings"]
    assert [(f["code"], f["severity"]) for f in opted] == [("SHM001", "warning")]
    assert "/apis/" in api.requests
    assert "not listed" not in r.output  # custom resources not installed are not asked for
    assert not any(p.endswith(("/rayclusters", "/leaderworkersets")) for p in api.requests) or any(
        o["kind"] in ("RayCluster", "LeaderWorkerSet") for o in objects
    )


def test_forbidden_custom_resource_is_a_note(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    api = Cluster(objects, NAMESPACES, WEBHOOK)
    plural = next(p for g, _, p in api.by_resource if g not in ("", "apps", "batch"))
    api.forbidden.add(plural)
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "-A"], conf)
    assert r.exit_code in (0, 1)
    assert ": not listed (403 Forbidden)" in r.stderr
    assert plural in r.stderr
    # the built-in view/edit/admin roles grant no podtemplates: a refused core kind is a
    # note and every other kind is still checked
    api.forbidden = {"podtemplates", "deployments"}
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "-A", "--json"], conf)
    assert r.exit_code in (0, 1), r.output
    assert "podtemplates: not listed (403 Forbidden)" in r.stderr
    assert "deployments.apps: not listed (403 Forbidden)" in r.stderr
    kinds = {f["file"].split("/")[4] for f in json.loads(r.stdout)["files"]}
    assert "Deployment" not in kinds and {"Job", "StatefulSet"} <= kinds
    # every list refused (-A for a user bound in one namespace): an error
    api.forbidden = {k[2] for k in KINDS}
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "-A"], conf)
    assert r.exit_code == 2
    assert r.stderr.startswith("shmguard: error: cannot list pods, podtemplates, ")
    assert r.stderr.endswith(
        " in any namespace (-A): 403 Forbidden (no workload kind could be read; RBAC needs "
        "list on them)\n"
    )
    assert len(r.stderr.splitlines()) == 1


def test_one_namespace_pages_and_no_webhook(
    objects: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_mod, "PAGE", 3)
    api = Cluster(objects, NAMESPACES, None)
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "-n", "research"], conf)
    assert r.exit_code == 1, r.output
    research = [
        o
        for o in objects
        if o["metadata"]["namespace"] == "research" and o["metadata"]["name"] != "owned-by-a-job"
    ]
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("cluster://")]
    assert heads and all(ln.startswith("cluster://loopback/research/") for ln in heads)
    assert {ln.split(" ", 1)[0] for ln in heads} <= {_uri(o) for o in research}
    assert "covered" not in r.stdout
    assert all("/namespaces/research/" in p for p in api.requests if p.endswith("deployments"))
    deployments = [o for o in research if o["kind"] == "Deployment"]
    assert api.requests.count("/apis/apps/v1/namespaces/research/deployments") == (
        len(deployments) // 3 + 1
    )


def test_default_namespace_comes_from_the_context(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    api = Cluster(objects, NAMESPACES, WEBHOOK)
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "--json"], conf)
    files = [f["file"] for f in json.loads(r.stdout)["files"]]
    assert files and all(f.startswith("cluster://loopback/ml/") for f in files)


def test_errors_are_one_line(objects: list[dict[str, Any]], tmp_path: Path) -> None:
    api = Cluster(objects[:3], NAMESPACES, None)
    with serve(api, tmp_path) as conf:
        r = _run(["check", "--cluster", "--context", "nope"], conf)
        assert r.exit_code == 2
        assert r.output.strip() == (
            "shmguard: error: --context nope: no such context in the kubeconfig"
        )
        r = _run(["check", "--cluster", "-n", "reserch"], conf)  # was exit 0, no findings
        assert (r.exit_code, r.stderr) == (2, "shmguard: error: namespace reserch: not found\n")
        r = _run(["check", "--cluster", "--context", "bad-user"], conf)
        assert r.exit_code == 2
        assert "cannot reach the API server of bad-user: (401)" in r.output
        assert len(r.output.strip().splitlines()) == 1
    r = _run(["check", "--cluster"], conf)  # the server is gone
    assert r.exit_code == 2 and "cannot reach the API server of loopback" in r.output
    gone = tmp_path / "no-such-kubeconfig"
    r = CliRunner().invoke(
        app,
        ["check", "--cluster"],
        env={"KUBECONFIG": str(gone), "KUBERNETES_SERVICE_HOST": None},
    )
    assert r.exit_code == 2
    assert r.stderr == (
        "shmguard: error: no kubeconfig (Invalid kube-config file. No configuration found.) "
        "and not running in a cluster\n"
    )
    for args, words in (
        (["check"], "give PATH... (- for standard input) or --cluster"),
        (["check", "--cluster", "x.yaml"], "give one or the other"),
        (["check", "-A", "x.yaml"], "--context, -n and -A go with --cluster"),
        (["check", "--cluster", "-n", "a", "-A"], "give one"),
        (["check", "--cluster", "--fix"], "--cluster reads live objects"),
    ):
        r = _run(args, conf)
        assert r.exit_code == 2 and words in r.output, (args, r.output)


def test_kubeconfig_without_current_context_or_unreadable(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    api = Cluster(objects[:40], NAMESPACES, None)
    with serve(api, tmp_path) as conf:
        kc = json.loads(conf.read_text())
        del kc["current-context"]  # as kubectl config unset current-context leaves it
        conf.write_text(json.dumps(kc))
        r = _run(["check", "--cluster", "--context", "loopback", "--json"], conf)
        assert r.exit_code in (0, 1), r.output
        files = [f["file"] for f in json.loads(r.stdout)["files"]]
        assert files and all(f.startswith("cluster://loopback/ml/") for f in files)
        r = _run(["check", "--cluster"], conf)
        assert r.exit_code == 2
        assert r.stderr == (
            f"shmguard: error: kubeconfig {conf}: no current-context; give --context "
            "(its contexts: bad-user, loopback)\n"
        )
        kc["current-context"] = "gone"
        conf.write_text(json.dumps(kc))
        r = _run(["check", "--cluster"], conf)
        assert r.stderr == (
            f"shmguard: error: kubeconfig {conf}: current-context gone is not among its contexts\n"
        )
        conf.write_text("contexts: [\n")  # not YAML: was a traceback
        r = _run(["check", "--cluster"], conf)
        assert r.exit_code == 2
        assert r.stderr == (f"shmguard: error: kubeconfig {conf}: while parsing a flow node\n")


def test_missing_client_is_a_one_line_error(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['kubernetes'] = None\n"
        "from shmguard.fleet.cluster import ClusterError, read_cluster\n"
        "try:\n    read_cluster()\nexcept ClusterError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "check --cluster needs the Kubernetes client: pip install 'shmguard[cluster]'"
    )


def _kubectl_list(items: list[dict[str, Any]]) -> str:
    """What ``kubectl get ... -A -o yaml`` prints: a v1 List of full objects."""
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}},
        sort_keys=False,
    )


def _namespaces() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n, **lb}},
        }
        for n, lb in NAMESPACES.items()
    ]


def test_kubectl_list_on_stdin(objects: list[dict[str, Any]]) -> None:
    workloads = [o for o in objects if o["kind"] in ("Deployment", "Job", "StatefulSet")]
    plain = CliRunner().invoke(app, ["check", "-", "--json"], input=_kubectl_list(workloads))
    found = json.loads(plain.stdout)["files"][0]["findings"]
    want = [c for o in workloads for c, _, _ in _file_findings(o)]
    assert sorted(f["code"] for f in found) == sorted(want)
    assert want.count("SHM001") >= 5
    assert not any("covered" in f["message"] for f in found)
    stream = _kubectl_list([WEBHOOK, *_namespaces(), *workloads])
    r = CliRunner().invoke(app, ["check", "-", "--json"], input=stream)
    aware = json.loads(r.stdout)["files"][0]["findings"]
    assert len(aware) == len(found)
    covered = [f for f in aware if "covered by the shmguard webhook" in f["message"]]
    ml_shm001 = sum(
        c == "SHM001"
        for o in workloads
        if o["metadata"]["namespace"] == "ml" and o["metadata"]["name"] != "opted-out" and _gpu(o)
        for c, m, _ in _file_findings(o)
        if "with no volume at /dev/shm" in m
    )
    assert len(covered) == ml_shm001 > 0
    assert all(f["severity"] == "info" and f["code"] == "SHM001" for f in covered)


def test_live_pod_in_a_covered_namespace_is_not_covered() -> None:
    def pod(name: str, **meta: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", **meta},
            "spec": {
                "containers": [
                    {
                        "name": "t",
                        "image": "pytorch/pytorch",
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ]
            },
        }

    # kubectl get pods -o yaml: pods that exist (uid) went through admission already;
    # a manifest not yet applied (no uid) will be sized by the webhook
    stream = _kubectl_list([WEBHOOK, *_namespaces(), pod("running", uid="u1"), pod("new")])
    r = CliRunner().invoke(app, ["check", "-", "--json"], input=stream)
    found = json.loads(r.stdout)["files"][0]["findings"]
    by_pod = {f["message"].split(" (")[0]: f for f in found}
    assert [f["code"] for f in found] == ["SHM001", "SHM001"]
    assert by_pod["Pod running"]["severity"] == "warning"
    assert by_pod["Pod running"]["message"].endswith(
        "but this pod was admitted without a /dev/shm (created before the webhook, or the "
        "webhook did not answer): recreate it"
    )
    assert by_pod["Pod new"]["severity"] == "info"
    assert "covered by the shmguard webhook" in by_pod["Pod new"]["message"]

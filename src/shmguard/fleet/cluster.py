"""Read the workloads of a live cluster through the official Kubernetes Python client
(``kubernetes``, the ``cluster`` extra), for ``check --cluster``.

Configuration: the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``; ``context`` picks a
context, else its current one), else the in-cluster service account
(``kubernetes.config.load_incluster_config``). Listed: every kind whose pod specs the
Kubernetes source knows (:data:`KINDS`: core, apps and batch through their typed APIs, the
ML custom resources through ``CustomObjectsApi``), in one namespace or all; a custom
resource the server does not serve (discovery: ``GET /apis``, then ``GET /apis/<group>/
<version>`` for the groups it has) is not asked for, and one it answers 404 for is
skipped with a note; so is any kind whose list is refused (403: the built-in ``view``,
``edit`` and ``admin`` roles grant no ``podtemplates``), unless every kind is refused
(kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy: system:aggregate-to-view).
Objects a controller owns (``ownerReferences`` with ``controller: true``: the ReplicaSets
of a Deployment, the pods of a Job) are left out, so each workload is reported once, where
it is written. Lists are read in pages of :data:`PAGE` items (``limit`` / ``continue``).
Also read: the namespaces' labels and the MutatingWebhookConfiguration named ``shmguard``
(:mod:`shmguard.fleet.coverage`).

Errors: :class:`ClusterError` (one line) when the client is not installed, no
configuration is found, the API server cannot be reached, answers a list with an error
other than 403/404, refuses every list, or has no namespace ``namespace``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shmguard.fleet import names
from shmguard.fleet.coverage import WebhookView

#: Items per list request.
PAGE = 500
#: Seconds a request may take (connect, read).
TIMEOUT = (5, 30)
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

#: (group, version, plural, kind, namespaced). Versions are the served ones of each
#: project's current CRD (the sources in :mod:`shmguard.sources.k8s_kinds`).
KINDS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("", "v1", "pods", "Pod", True),
    ("", "v1", "podtemplates", "PodTemplate", True),
    ("", "v1", "replicationcontrollers", "ReplicationController", True),
    ("apps", "v1", "deployments", "Deployment", True),
    ("apps", "v1", "statefulsets", "StatefulSet", True),
    ("apps", "v1", "daemonsets", "DaemonSet", True),
    ("apps", "v1", "replicasets", "ReplicaSet", True),
    ("batch", "v1", "jobs", "Job", True),
    ("batch", "v1", "cronjobs", "CronJob", True),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True),
    ("kubeflow.org", "v1", "tfjobs", "TFJob", True),
    ("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob", True),
    ("kubeflow.org", "v1", "paddlejobs", "PaddleJob", True),
    ("kubeflow.org", "v1", "jaxjobs", "JAXJob", True),
    ("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", True),
    ("kubeflow.org", "v1beta1", "experiments", "Experiment", True),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True),
    ("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", True),
    (
        "trainer.kubeflow.org",
        "v1alpha1",
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        False,
    ),
    ("ray.io", "v1", "rayclusters", "RayCluster", True),
    ("ray.io", "v1", "rayjobs", "RayJob", True),
    ("ray.io", "v1", "rayservices", "RayService", True),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True),
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True),
    ("batch.volcano.sh", "v1alpha1", "jobs", "Job", True),
    ("serving.knative.dev", "v1", "services", "Service", True),
    ("serving.knative.dev", "v1", "configurations", "Configuration", True),
    ("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService", True),
    ("serving.kserve.io", "v1alpha1", "servingruntimes", "ServingRuntime", True),
    ("serving.kserve.io", "v1alpha1", "clusterservingruntimes", "ClusterServingRuntime", False),
    ("serving.kserve.io", "v1alpha1", "llminferenceservices", "LLMInferenceService", True),
    ("argoproj.io", "v1alpha1", "workflows", "Workflow", True),
    ("argoproj.io", "v1alpha1", "workflowtemplates", "WorkflowTemplate", True),
    ("argoproj.io", "v1alpha1", "clusterworkflowtemplates", "ClusterWorkflowTemplate", False),
    ("argoproj.io", "v1alpha1", "cronworkflows", "CronWorkflow", True),
)


class ClusterError(Exception):
    """The cluster could not be read (the message is one line, for the CLI)."""


@dataclass
class Snapshot:
    """What was read: the context's name, the objects (each with ``apiVersion`` and
    ``kind``), the webhook view, and notes on what was skipped."""

    context: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    view: WebhookView = field(default_factory=WebhookView)
    notes: list[str] = field(default_factory=list)


def _client() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise ClusterError(
            "check --cluster needs the Kubernetes client: pip install 'shmguard[cluster]'"
        ) from None
    return kubernetes


def connect(context: str | None = None) -> tuple[Any, str, str]:
    """An ``ApiClient``, the context's name and its default namespace: from the kubeconfig
    (``context`` or its current context), else in-cluster when no context was asked for.

    Raises:
        ClusterError: the client is missing, or no usable configuration was found.
    """
    k8s = _client()
    from kubernetes.config.config_exception import ConfigException

    # read at each call: the client reads $KUBECONFIG once, when it is imported
    kube_config = k8s.config.kube_config
    path = os.environ.get("KUBECONFIG") or kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    bad = (ConfigException, OSError, ValueError, yaml.YAMLError)
    try:
        merged = kube_config.KubeConfigMerger(path).config  # None when no file of the path exists
    except bad as err:
        raise ClusterError(f"kubeconfig {path}: {_short(err)}") from None
    if merged is not None:
        contexts = {}
        for node in merged.safe_get("contexts") or ():
            c = getattr(node, "value", node)
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                contexts[c["name"]] = c
        # the client's own listing insists on current-context even when a context is named
        name = context or merged.safe_get("current-context")
        if not name:
            known = ", ".join(sorted(contexts)) or "none"
            raise ClusterError(
                f"kubeconfig {path}: no current-context; give --context (its contexts: {known})"
            )
        if name not in contexts:
            if context:
                raise ClusterError(f"--context {context}: no such context in the kubeconfig")
            raise ClusterError(
                f"kubeconfig {path}: current-context {name} is not among its contexts"
            )
        try:
            api = k8s.config.new_client_from_config(config_file=path, context=name)
        except bad as err:
            raise ClusterError(f"context {name}: {_short(err)}") from None
        ns = (contexts[name].get("context") or {}).get("namespace") or "default"
        return api, name, ns
    if context is not None:
        raise ClusterError(f"--context {context}: no kubeconfig at {path}")
    kube_err = "Invalid kube-config file. No configuration found."
    try:
        cfg = k8s.client.Configuration()
        k8s.config.load_incluster_config(client_configuration=cfg)
    except ConfigException:
        raise ClusterError(f"no kubeconfig ({kube_err}) and not running in a cluster") from None
    ns = _SA_NAMESPACE.read_text().strip() if _SA_NAMESPACE.is_file() else "default"
    return k8s.client.ApiClient(cfg), "in-cluster", ns


def _status(err: Any) -> int:
    return int(getattr(err, "status", 0) or 0)


def _raw(resp: Any) -> Any:
    return json.loads(resp.data)


def _builtin_list(api: Any, group: str, plural: str, ns: str | None, token: str | None) -> Any:
    k8s = _client()
    klass = {"": k8s.client.CoreV1Api, "apps": k8s.client.AppsV1Api, "batch": k8s.client.BatchV1Api}
    snake = {
        "pods": "pod", "podtemplates": "pod_template",
        "replicationcontrollers": "replication_controller", "deployments": "deployment",
        "statefulsets": "stateful_set", "daemonsets": "daemon_set", "replicasets": "replica_set",
        "jobs": "job", "cronjobs": "cron_job",
    }[plural]  # fmt: skip
    typed = klass[group](api)
    kw: dict[str, Any] = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT}
    if token:
        kw["_continue"] = token
    if ns is None:
        return _raw(getattr(typed, f"list_{snake}_for_all_namespaces")(**kw))
    return _raw(getattr(typed, f"list_namespaced_{snake}")(ns, **kw))


def _custom_list(
    api: Any, kind: tuple[str, str, str, str, bool], ns: str | None, token: str | None
) -> Any:
    group, version, plural, _, namespaced = kind
    custom = _client().client.CustomObjectsApi(api)
    kw: dict[str, Any] = {"limit": PAGE, "_request_timeout": TIMEOUT}
    if token:
        kw["_continue"] = token
    if ns is None or not namespaced:
        return custom.list_cluster_custom_object(group, version, plural, **kw)
    return custom.list_namespaced_custom_object(group, version, ns, plural, **kw)


def _pages(api: Any, kind: tuple[str, str, str, str, bool], ns: str | None) -> Iterator[Any]:
    token: str | None = None
    while True:
        if kind[0] in _BUILTIN_GROUPS:
            page = _builtin_list(api, kind[0], kind[2], ns, token)
        else:
            page = _custom_list(api, kind, ns, token)
        yield from page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


_BUILTIN_GROUPS = ("", "apps", "batch")


def _resources(api: Any, group: str, version: str, notes: list[str]) -> set[str]:
    """The resource names ``group/version`` serves (``GET /apis/<group>/<version>``); empty
    when the version is not served (404) or discovery is refused (noted)."""
    k8s = _client()
    try:
        body = _raw(
            k8s.client.CustomObjectsApi(api).get_api_resources(
                group, version, _preload_content=False, _request_timeout=TIMEOUT
            )
        )
    except k8s.client.ApiException as err:
        if _status(err) != 404:
            notes.append(f"{group}/{version}: not listed ({_status(err)} {err.reason})")
        return set()
    return {r.get("name", "") for r in body.get("resources") or ()}


def _owned(obj: dict[str, Any]) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("controller") for r in refs)


def _groups(api: Any) -> set[str]:
    k8s = _client()
    body = _raw(k8s.client.ApisApi(api).get_api_versions(_preload_content=False))
    return {g.get("name", "") for g in body.get("groups") or ()}


def read_cluster(
    context: str | None = None, namespace: str | None = None, all_namespaces: bool = False
) -> Snapshot:
    """Every workload object in ``namespace`` (default: the context's), or in all namespaces
    (``all_namespaces``), with the namespaces' labels and the shmguard webhook configuration.

    Raises:
        ClusterError: see the module docstring.
    """
    k8s = _client()
    api, name, default_ns = connect(context)
    ns = None if all_namespaces else (namespace or default_ns)
    snap = Snapshot(name)
    try:
        groups = _groups(api)
    except Exception as err:  # the client raises urllib3 and ApiException errors alike
        raise ClusterError(f"cannot reach the API server of {name}: {_short(err)}") from None
    served: dict[tuple[str, str], set[str]] = {}
    listed = 0
    refused: list[str] = []
    for kind in KINDS:
        group, version, plural, kname, namespaced = kind
        if group and group not in groups:
            continue
        if ns is not None and not namespaced:
            continue  # cluster-scoped: only with -A
        if group not in _BUILTIN_GROUPS:
            if (group, version) not in served:
                served[group, version] = _resources(api, group, version, snap.notes)
            if plural not in served[group, version]:
                continue  # that version of the custom resource is not installed
        try:
            for obj in _pages(api, kind, ns):
                if _owned(obj):
                    continue
                obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
                obj.setdefault("kind", kname)
                snap.objects.append(obj)
            listed += 1
        except k8s.client.ApiException as err:
            what = f"{plural}.{group}" if group else plural
            # RBAC grants kinds one by one: the built-in view/edit/admin roles have no
            # podtemplates, so one refused kind is a note, not the end of the check
            if _status(err) == 403 or (_status(err) == 404 and group not in _BUILTIN_GROUPS):
                snap.notes.append(f"{what}: not listed ({_status(err)} {err.reason})")
                if _status(err) == 403:
                    refused.append(what)
                continue
            raise ClusterError(f"cannot list {what}: {_status(err)} {err.reason}") from None
        except Exception as err:  # urllib3's connection errors
            what = f"{plural}.{group}" if group else plural
            raise ClusterError(f"cannot list {what}: {_short(err)}") from None
    if refused and not listed:
        where = "in any namespace (-A)" if ns is None else f"in namespace {ns}"
        raise ClusterError(
            f"cannot list {', '.join(refused)} {where}: 403 Forbidden (no workload kind "
            "could be read; RBAC needs list on them)"
        )
    snap.view = _view(api, ns, snap.notes)
    return snap


def _view(api: Any, ns: str | None, notes: list[str]) -> WebhookView:
    k8s = _client()
    core = k8s.client.CoreV1Api(api)
    spaces: dict[str, dict[str, str]] = {}
    try:
        if ns is None:
            items = _raw(core.list_namespace(_preload_content=False)).get("items") or ()
        else:
            items = [_raw(core.read_namespace(ns, _preload_content=False))]
        for n in items:
            meta = n.get("metadata") or {}
            spaces[meta.get("name", "")] = dict(meta.get("labels") or {})
    except k8s.client.ApiException as err:
        if ns is not None and _status(err) == 404:
            # every list answered empty: a mistyped -n would pass as a clean cluster
            raise ClusterError(f"namespace {ns}: not found") from None
        notes.append(f"namespaces: labels not read ({_status(err)} {err.reason})")
    hooks: tuple[dict[str, Any], ...] = ()
    try:
        adm = k8s.client.AdmissionregistrationV1Api(api)
        conf = _raw(
            adm.read_mutating_webhook_configuration(
                names.WEBHOOK_CONFIGURATION, _preload_content=False
            )
        )
        hooks = tuple(conf.get("webhooks") or ())
    except k8s.client.ApiException as err:
        if _status(err) != 404:
            notes.append(
                f"mutatingwebhookconfiguration {names.WEBHOOK_CONFIGURATION}: not read "
                f"({_status(err)} {err.reason})"
            )
    return WebhookView(hooks, spaces)


def _short(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__

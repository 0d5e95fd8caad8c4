"""What ``check`` knows of the shmguard webhook: which pods it sizes, told from objects (the
MutatingWebhookConfiguration ``shmguard``, the namespaces' labels and the pod template's
annotations), and the SHM001 findings it covers.

This is ``check``'s own step (:func:`cover`, over a file or a ``kubectl get -o yaml`` stream
with :func:`stream_view`, and over a live cluster's objects in
:mod:`shmguard.fleet.cluster_check`), so it lives below the webhook's package: the library's
:func:`shmguard.lint.report.check_paths` and ``shmguard check`` run it alike.
:mod:`shmguard.fleet.coverage` names the same values for the webhook's side.

A pod is *covered* when

* a MutatingWebhookConfiguration named :data:`WEBHOOK_CONFIGURATION`
  is known (read from the API, or found in the checked stream) with at least one webhook;
* its namespace is not one the webhook skips (:data:`SKIPPED_NAMESPACES`) and matches the
  webhook's ``namespaceSelector`` (label selector semantics: ``matchLabels`` and
  ``matchExpressions`` with ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, as
  kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors), and
  its pod labels match the ``objectSelector``;
* the pod annotation ``shmguard.io/inject`` (:data:`POD_INJECT_ANNOTATION`) is not
  ``"false"``, and is ``"true"``, or the namespace carries ``shmguard.io/inject`` =
  ``enabled`` (:data:`NAMESPACE_LABEL`, :data:`NAMESPACE_LABEL_VALUE`) and a container
  requests an accelerator (:data:`~shmguard.sources.k8s_model.GPU_RESOURCES` in its limits or
  requests).

The configuration's ``matchConditions`` (CEL) are not evaluated: the opt-in rules above are
the ones the shipped configuration encodes (deploy/webhook/mutatingwebhookconfiguration.yaml:
``gpu-or-opted-in`` and ``not-opted-out``); a PyTorch pod with no GPU request in a labelled
namespace is not sent to the webhook, so it is not covered. A namespace whose
labels are unknown (not in the stream, or not readable) has only its
``kubernetes.io/metadata.name`` label, which the API server sets on every namespace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shmguard.config import ANNOTATIONS, LABELS
from shmguard.model import Severity
from shmguard.sources.k8s_model import dig, text

if TYPE_CHECKING:
    from shmguard.lint.check import FileResult
    from shmguard.model.finding import Finding
    from shmguard.sources.k8s import PodSpec
    from shmguard.sources.load import LoadedFile

#: Name of the MutatingWebhookConfiguration (part of shmguard's interface with a cluster, as
#: every name in :mod:`shmguard.fleet.names`, which takes it from here).
WEBHOOK_CONFIGURATION = "shmguard"
#: The value of the namespace label :data:`NAMESPACE_LABEL` that opts a namespace's pods in.
NAMESPACE_LABEL_VALUE = "enabled"
#: Namespace label that opts every pod of the namespace in (value ``enabled``); the
#: MutatingWebhookConfiguration's ``namespaceSelector`` matches it.
NAMESPACE_LABEL = LABELS["inject"]
#: Pod annotation that opts one pod in (``"true"``) or out (``"false"``) whatever its
#: namespace says; the webhook's ``matchConditions`` read it.
POD_INJECT_ANNOTATION = ANNOTATIONS["inject"]

#: Namespaces the webhook never sizes pods in.
SKIPPED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
_NAME_LABEL = "kubernetes.io/metadata.name"


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a Kubernetes label selector (None or ``{}`` match all; an
    unknown operator matches nothing, as the API server would reject it)."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or ()
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


@dataclass(frozen=True)
class WebhookView:
    """What ``check`` knows of the webhook: the configuration's webhooks (dicts as the API
    returns them; empty when there is no configuration) and namespace name -> labels."""

    webhooks: tuple[Mapping[str, Any], ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] | None = None

    @property
    def installed(self) -> bool:
        """True when the configuration was found with at least one webhook."""
        return bool(self.webhooks)

    def labels_of(self, namespace: str) -> dict[str, str]:
        """The namespace's labels (only its name label when unknown)."""
        known = dict((self.namespaces or {}).get(namespace) or {})
        known.setdefault(_NAME_LABEL, namespace)
        return known

    def covers(
        self,
        namespace: str | None,
        annotations: Mapping[str, str],
        labels: Mapping[str, str],
        gpu: bool = False,
    ) -> str | None:
        """Why the webhook sizes a pod in ``namespace`` with these pod annotations and labels
        (``gpu``: a container requests an accelerator), in words, or None when it does not."""
        if not self.installed:
            return None
        ns = namespace or "default"
        if ns in SKIPPED_NAMESPACES:
            return None
        opt = annotations.get(POD_INJECT_ANNOTATION)
        if opt == "false":
            return None
        ns_labels = self.labels_of(ns)
        if not any(
            selector_matches(w.get("namespaceSelector"), ns_labels)
            and selector_matches(w.get("objectSelector"), labels)
            for w in self.webhooks
        ):
            return None
        if opt == "true":
            return f'annotation {POD_INJECT_ANNOTATION}: "true"'
        if gpu and ns_labels.get(NAMESPACE_LABEL) == NAMESPACE_LABEL_VALUE:
            return (
                f"namespace {ns} is labelled {NAMESPACE_LABEL}={NAMESPACE_LABEL_VALUE}"
                " and the pod requests a GPU"
            )
        return None


def view_from_objects(objects: Iterable[Mapping[str, Any]]) -> WebhookView:
    """The webhook view found among objects (a ``kubectl get -o yaml`` stream): the
    MutatingWebhookConfiguration named ``shmguard`` and every Namespace's labels."""
    hooks: tuple[Mapping[str, Any], ...] = ()
    spaces: dict[str, Mapping[str, str]] = {}
    for o in objects:
        kind, meta = o.get("kind"), o.get("metadata") or {}
        if not isinstance(meta, Mapping):
            continue
        if kind == "MutatingWebhookConfiguration" and meta.get("name") == (WEBHOOK_CONFIGURATION):
            hooks = tuple(w for w in o.get("webhooks") or () if isinstance(w, Mapping))
        elif kind == "Namespace" and isinstance(meta.get("name"), str):
            labels = meta.get("labels") or {}
            spaces[meta["name"]] = {str(k): str(v) for k, v in dict(labels).items()}
    return WebhookView(hooks, spaces)


#: The words of SHM001's Kubernetes finding for a container with nothing at /dev/shm (its
#: disk-backed emptyDir variant says otherwise and is not covered).
_NO_SHM = "with no volume at /dev/shm"


def _pod_for(lf: LoadedFile, path: str | None) -> PodSpec | None:
    """The pod spec whose YAML path is the longest prefix of ``path``."""
    if path is None:
        return None
    best: PodSpec | None = None
    for pod in lf.pod_specs:
        p = pod.path
        if (path == p or path.startswith((p + ".", p + "["))) and (
            best is None or len(p) > len(best.path)
        ):
            best = pod
    return best


def _strings(nodes: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, n in nodes.items() if (v := text(n)) is not None}


def _admitted(pod: PodSpec) -> bool:
    """Whether ``pod`` is a Pod object read back from an API server (it has a ``uid``)."""
    uid = dig(pod.obj.node, "metadata", "uid")
    return pod.obj.kind == "Pod" and not pod.obj.group and uid is not None


def cover(result: FileResult, lf: LoadedFile, view: WebhookView) -> FileResult:
    """``result`` with each SHM001 no-/dev/shm finding in a pod the webhook sizes turned into
    an info finding saying it is covered (and why). A Pod read back from the API (it has a
    ``metadata.uid``) was admitted already: its finding stays a warning and says the webhook
    did not size it."""
    if not view.installed:
        return result
    out: list[Finding] = []
    for f in result.findings:
        pod = _pod_for(lf, f.location.path if f.location else None)
        why = None
        if f.code == "SHM001" and _NO_SHM in f.message and pod is not None:
            gpu = any(c.gpu is not None for c in pod.containers)
            why = view.covers(
                pod.obj.namespace, _strings(pod.annotations), _strings(pod.labels), gpu
            )
        if why is None:
            out.append(f)
            continue
        if pod is not None and _admitted(pod):
            # a Pod the API server holds went through admission already: the webhook did
            # not size it, whatever its namespace says now
            out.append(
                dataclasses.replace(
                    f,
                    message=f"{f.message}; the shmguard webhook covers it ({why}) but this pod "
                    "was admitted without a /dev/shm (created before the webhook, or the "
                    "webhook did not answer): recreate it",
                )
            )
            continue
        out.append(
            dataclasses.replace(
                f,
                severity=Severity.INFO,
                message=f"{f.message}; covered by the shmguard webhook ({why}): its pods get "
                "a sized /dev/shm at admission",
                fix=None,
            )
        )
    return dataclasses.replace(result, findings=tuple(out))


def stream_view(lf: LoadedFile) -> WebhookView:
    """The webhook view found in a loaded stream (``kubectl get mutatingwebhookconfiguration,
    namespaces,deployments -A -o yaml``): empty unless it holds the shmguard configuration."""
    if lf.src is None or not any(
        o.kind == "MutatingWebhookConfiguration" and o.name == WEBHOOK_CONFIGURATION
        for o in lf.objects
    ):
        return WebhookView()
    import yaml  # here: only a stream that holds the configuration is read again

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(lf.src.text, Loader=loader) if isinstance(d, Mapping)]
    except yaml.YAMLError:
        return WebhookView()
    return view_from_objects(_expand(docs))


def _expand(docs: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for d in docs:
        kind = d.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(d.get("items"), list):
            yield from _expand(i for i in d["items"] if isinstance(i, Mapping))
        else:
            yield d

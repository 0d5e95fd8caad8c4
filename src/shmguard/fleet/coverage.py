"""Which pods the shmguard webhook sizes, told from objects: the MutatingWebhookConfiguration
``shmguard``, the namespaces' labels and the pod template's annotations.

A pod is *covered* when

* a MutatingWebhookConfiguration named :data:`~shmguard.fleet.names.WEBHOOK_CONFIGURATION`
  is known (read from the API, or found in the checked stream) with at least one webhook;
* its namespace is not one the webhook skips (:data:`SKIPPED_NAMESPACES`) and matches the
  webhook's ``namespaceSelector`` (label selector semantics: ``matchLabels`` and
  ``matchExpressions`` with ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, as
  kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors), and
  its pod labels match the ``objectSelector``;
* the pod annotation :data:`~shmguard.fleet.names.POD_INJECT_ANNOTATION` is not ``"false"``,
  and is ``"true"``, or the namespace carries :data:`~shmguard.fleet.names.NAMESPACE_LABEL` =
  ``enabled`` and a container requests an accelerator
  (:data:`~shmguard.sources.k8s_model.GPU_RESOURCES` in its limits or requests).

The configuration's ``matchConditions`` (CEL) are not evaluated: the opt-in rules above are
the ones the shipped configuration encodes (deploy/webhook/mutatingwebhookconfiguration.yaml:
``gpu-or-opted-in`` and ``not-opted-out``); a PyTorch pod with no GPU request in a labelled
namespace is not sent to the webhook, so it is not covered. A namespace whose
labels are unknown (not in the stream, or not readable) has only its
``kubernetes.io/metadata.name`` label, which the API server sets on every namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shmguard.fleet import names

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
        opt = annotations.get(names.POD_INJECT_ANNOTATION)
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
            return f'annotation {names.POD_INJECT_ANNOTATION}: "true"'
        if gpu and ns_labels.get(names.NAMESPACE_LABEL) == names.NAMESPACE_LABEL_VALUE:
            return (
                f"namespace {ns} is labelled {names.NAMESPACE_LABEL}={names.NAMESPACE_LABEL_VALUE}"
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
        if kind == "MutatingWebhookConfiguration" and meta.get("name") == (
            names.WEBHOOK_CONFIGURATION
        ):
            hooks = tuple(w for w in o.get("webhooks") or () if isinstance(w, Mapping))
        elif kind == "Namespace" and isinstance(meta.get("name"), str):
            labels = meta.get("labels") or {}
            spaces[meta["name"]] = {str(k): str(v) for k, v in dict(labels).items()}
    return WebhookView(hooks, spaces)

"""The Kubernetes names the webhook, the generated policies and ``check --cluster`` share.

Every value here is part of shmguard's interface with a cluster: changing one breaks
deployed webhook configurations and pods annotated by an older release. The annotation and
label names are :mod:`shmguard.config`'s (``ANNOTATIONS``, ``LABELS``), defined once there.
"""

from __future__ import annotations

from shmguard.config import ANNOTATIONS, LABELS

#: Annotation and label prefix (a DNS subdomain we own, as Kubernetes asks of prefixed keys:
#: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set).
PREFIX = "shmguard.io"

#: Namespace label that opts every pod of the namespace in (value ``enabled``); the
#: MutatingWebhookConfiguration's ``namespaceSelector`` matches it.
NAMESPACE_LABEL = LABELS["inject"]
NAMESPACE_LABEL_VALUE = "enabled"

#: Pod annotation that opts one pod in (``"true"``) or out (``"false"``) whatever its
#: namespace says; the webhook's ``matchConditions`` read it.
POD_INJECT_ANNOTATION = ANNOTATIONS["inject"]

#: Pod annotation giving the /dev/shm size in Kubernetes quantity syntax (``2Gi``).
SHM_SIZE_ANNOTATION = ANNOTATIONS["shm-size"]

#: Pod annotation asking the webhook to raise the memory limit by the shm size (``"true"``).
RAISE_MEMORY_ANNOTATION = ANNOTATIONS["raise-memory"]

#: Pod annotation the webhook writes with its decision (one line, human-readable).
DECISION_ANNOTATION = ANNOTATIONS["decision"]

#: Name of the MutatingWebhookConfiguration and of the webhook in it.
WEBHOOK_CONFIGURATION = "shmguard"
WEBHOOK_NAME = "shm.shmguard.io"

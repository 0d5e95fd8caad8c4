"""The Kubernetes names the webhook, the generated policies and ``check --cluster`` share.

Every value here is part of shmguard's interface with a cluster: changing one breaks
deployed webhook configurations and pods annotated by an older release. The annotation and
label names are :mod:`shmguard.config`'s (``ANNOTATIONS``, ``LABELS``), defined once there;
the ones ``check`` reads to tell which pods the webhook sizes are
:mod:`shmguard.lint.coverage`'s, named here too.
"""

from __future__ import annotations

from shmguard.config import ANNOTATIONS
from shmguard.lint.coverage import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    POD_INJECT_ANNOTATION,
    WEBHOOK_CONFIGURATION,
)

__all__ = [
    "DECISION_ANNOTATION",
    "NAMESPACE_LABEL",
    "NAMESPACE_LABEL_VALUE",
    "POD_INJECT_ANNOTATION",
    "PREFIX",
    "RAISE_MEMORY_ANNOTATION",
    "SHM_SIZE_ANNOTATION",
    "WEBHOOK_CONFIGURATION",
    "WEBHOOK_NAME",
]

#: Annotation and label prefix (a DNS subdomain we own, as Kubernetes asks of prefixed keys:
#: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set).
PREFIX = "shmguard.io"

#: Pod annotation giving the /dev/shm size in Kubernetes quantity syntax (``2Gi``).
SHM_SIZE_ANNOTATION = ANNOTATIONS["shm-size"]

#: Pod annotation asking the webhook to raise the memory limit by the shm size (``"true"``).
RAISE_MEMORY_ANNOTATION = ANNOTATIONS["raise-memory"]

#: Pod annotation the webhook writes with its decision (one line, human-readable).
DECISION_ANNOTATION = ANNOTATIONS["decision"]

#: Name of the webhook in the MutatingWebhookConfiguration :data:`WEBHOOK_CONFIGURATION`.
WEBHOOK_NAME = "shm.shmguard.io"

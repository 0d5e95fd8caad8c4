"""Which workload a pod belongs to: from kube-state-metrics' owner series, else from its name.

The owner series (kube-state-metrics' docs/metrics/workload/pod-metrics.md and
replicaset-metrics.md, job-metrics.md) are exact: ``kube_pod_owner{namespace, pod,
owner_kind, owner_name}``, then ``kube_replicaset_owner{namespace, replicaset, owner_kind,
owner_name}`` from a ReplicaSet up to its Deployment and ``kube_job_owner{namespace, job_name,
owner_kind, owner_name}`` from a Job up to its CronJob. A pod without an owner has
``owner_kind="<none>"``.

Without them the pod's name is read the way Kubernetes' controllers write it, first rule that
matches (the random parts use rand.SafeEncodeString's alphabet
``bcdfghjklmnpqrstvwxz2456789``, k8s.io/apimachinery/pkg/util/rand/rand.go; the 5-character
suffix is the API server's generateName, k8s.io/apiserver/pkg/storage/names):

1. ``<name>-<6-10>-<5>``: a Deployment's pod (ReplicaSet ``<name>-<pod-template-hash>``, the
   hash a 32-bit number's decimal digits each mapped to a character: 6 to 10 of them but for
   one hash in ten thousand);
2. ``<name>-<8+ digits>-<5>``: a CronJob's pod (Job ``<name>-<scheduled minute>``);
3. ``<name>-<master|worker|launcher|chief|ps|evaluator>-<index>``: a Kubeflow training job's
   replica (``<job>-<replica type>-<index>``, the training operator's pod names);
4. ``<name>-<ordinal>``: a StatefulSet's pod;
5. ``<name>-<5>``: a Job's or DaemonSet's pod (the name cannot tell which);
6. anything else: the pod itself.

Limits: a bare pod named like one of these (``web-12``, ``api-bcdfg``) is taken for a
controller's, and so is a DaemonSet or Job whose own name ends in 6-10 characters of the
alphabet (``sync-bcdfghj-x2x4k`` reads as Deployment ``sync``); a Deployment whose name
itself ends like a hash is still split right (only the last two parts are read); a
ReplicaSet created by hand, an Argo or Ray pod and other operators' names fall to rules 4-6.
Owner series, when Prometheus has them, replace all of this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shmguard.monitor.prom import Sample

_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
#: (kind, pattern) in the order tried; group 1 is the workload's name.
NAME_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Deployment", re.compile(rf"(.+)-{_SAFE}{{6,10}}-{_SAFE}{{5}}")),
    ("CronJob", re.compile(rf"(.+)-\d{{8,}}-{_SAFE}{{5}}")),
    ("TrainingJob", re.compile(r"(.+)-(?:master|worker|launcher|chief|ps|evaluator)-\d+")),
    ("StatefulSet", re.compile(r"(.+)-\d+")),
    ("Job/DaemonSet", re.compile(rf"(.+)-{_SAFE}{{5}}")),
)


@dataclass(frozen=True)
class WorkloadRef:
    """A workload: ``kind`` (``Deployment``, ``StatefulSet``, ``Job``, ``CronJob``,
    ``DaemonSet``, ``Pod``; from a name, also ``Job/DaemonSet`` and ``TrainingJob``; for a
    series with no ``pod`` label, ``instance``), its ``name`` (for ``instance``: the scrape
    address), and ``source``: ``owner`` (kube-state-metrics), ``name`` (the rules above) or
    ``instance``."""

    kind: str
    name: str
    source: str


def workload_from_name(pod: str) -> WorkloadRef:
    """The workload a pod's name points to (the module's rules 1-6)."""
    for kind, pattern in NAME_RULES:
        m = pattern.fullmatch(pod)
        if m is not None:
            return WorkloadRef(kind, m.group(1), "name")
    return WorkloadRef("Pod", pod, "name")


@dataclass(frozen=True)
class Owners:
    """Owner maps from kube-state-metrics' series (empty when Prometheus has none).

    Attributes:
        pods: ``(namespace, pod) -> (owner_kind, owner_name)``.
        parents: ``(namespace, kind, name) -> (owner_kind, owner_name)`` for ReplicaSets
            and Jobs that have an owner.
    """

    pods: Mapping[tuple[str, str], tuple[str, str]]
    parents: Mapping[tuple[str, str, str], tuple[str, str]]

    @classmethod
    def from_samples(
        cls,
        pod_owner: Iterable[Sample],
        replicaset_owner: Iterable[Sample] = (),
        job_owner: Iterable[Sample] = (),
    ) -> Owners:
        """Build the maps from ``kube_pod_owner``, ``kube_replicaset_owner`` and
        ``kube_job_owner`` samples; a pod whose owner is ``<none>`` is its own workload
        (kind ``Pod``), a ReplicaSet or Job whose owner is ``<none>`` stays the top."""
        pods = {}
        for s in pod_owner:
            kind, name = s.labels.get("owner_kind", ""), s.labels.get("owner_name", "")
            pod = s.labels.get("pod", "")
            if kind == "<none>":
                kind, name = "Pod", pod
            if kind and name:
                pods[(s.labels.get("namespace", ""), pod)] = (kind, name)
        parents = {}
        for child, key, samples in (
            ("ReplicaSet", "replicaset", replicaset_owner),
            ("Job", "job_name", job_owner),
        ):
            for s in samples:
                kind, name = s.labels.get("owner_kind", ""), s.labels.get("owner_name", "")
                if kind and kind != "<none>" and name:
                    parents[(s.labels.get("namespace", ""), child, s.labels.get(key, ""))] = (
                        kind,
                        name,
                    )
        return cls(pods, parents)

    def workload(self, namespace: str, pod: str) -> WorkloadRef:
        """The pod's top owner (a ReplicaSet's Deployment, a Job's CronJob), a bare pod
        itself when kube-state-metrics says it has none, else :func:`workload_from_name`."""
        owner = self.pods.get((namespace, pod))
        if owner is None:
            return workload_from_name(pod)
        kind, name = owner
        parent = self.parents.get((namespace, kind, name))
        if parent is not None:
            kind, name = parent
        return WorkloadRef(kind, name, "owner")

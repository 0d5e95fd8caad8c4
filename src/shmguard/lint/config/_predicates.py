"""Predicates more than one SHM rule asks, kept here so that no rule imports another rule
(tests/test_architecture.py holds every ``shm*.py`` and ``env*.py`` module to it).

The workload-strength predicate is the detector's (:func:`shmguard.sources.workload.strong`);
what is here reads a pod's /dev/shm volumes and a size's syntax.
"""

from __future__ import annotations

import re

from shmguard.fix.k8s_yaml import reusable_volume
from shmguard.lint.config._base import Unit, is_dev_shm
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Container, Volume, text
from shmguard.sources.workload import Workload, strong
from shmguard.units import SizeError, parse_docker_size

__all__ = ["k8s_suffixed", "shm_given_otherwise", "unmounted_shm_volume"]


def shm_given_otherwise(pod: PodSpec) -> bool:
    """True when ``pod`` gets its /dev/shm some other way than an emptyDir of its own: a KubeRay
    pod (the operator mounts one), an MPIJob launcher (mpirun only), a TrainJob (the pod spec
    is in the TrainingRuntime) or ``hostIPC: true``."""
    if "kuberay" in pod.notes or "mpi-launcher" in pod.notes:
        return True
    if any(n.startswith("trainjob") for n in pod.notes):
        return True
    return text(pod.host_ipc) in ("true", "True", "yes", "on")


def unmounted_shm_volume(unit: Unit, c: Container, wl: Workload) -> Volume | None:
    """The pod's /dev/shm emptyDir that ML container ``c`` does not mount, or None (SHM007
    reports it, SHM001 leaves the container to SHM007).

    None also when ``c`` is no (strong) ML container, already has a volume at /dev/shm, mounts
    the volume elsewhere, or the pod gets /dev/shm otherwise (:func:`shm_given_otherwise`)."""
    pod = unit.pod
    if pod is None or shm_given_otherwise(pod) or not strong(wl) or c.init:
        return None
    if any(is_dev_shm(text(m.mount_path)) for m in c.volume_mounts):
        return None
    v = reusable_volume(pod)
    if v is None or not v.name or any(m.name == v.name for m in c.volume_mounts):
        return None
    return v


_K8S_SUFFIX = re.compile(r"^\s*\d+(?:\.\d+)?\s?[KMGTPkmgtp]i$")


def k8s_suffixed(value: str) -> int | None:
    """Bytes of ``value`` when it is a number with a Kubernetes binary suffix (``2Gi``,
    ``512Mi``) that go-units v0.5 rejects and v0.4 reads; else None (SHM002 in Docker, Compose
    and Podman sizes, SHM022 in daemon.json)."""
    if not _K8S_SUFFIX.match(value):
        return None
    try:
        parse_docker_size(value)
        return None
    except SizeError:
        pass
    try:
        return parse_docker_size(value.strip(), legacy=True)
    except SizeError:
        return None

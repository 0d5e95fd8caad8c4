"""Which container runtime (or scheduler) the inspected process runs under, with the evidence.

Markers (each documented by its runtime):

* Kubernetes: ``KUBERNETES_SERVICE_HOST`` in the environment (the kubelet injects service
  environment variables into every container, kubernetes.io "Container Environment"), the
  service-account mount ``/var/run/secrets/kubernetes.io/serviceaccount``, or a ``kubepods``
  cgroup path.
* Podman: ``/run/.containerenv`` (podman-run(1): "Podman creates /run/.containerenv") and
  ``container=podman`` in the environment.
* Docker: ``/.dockerenv`` (created by moby's ``daemon/initlayer``), or a ``docker`` cgroup path.
* Apptainer/Singularity: ``APPTAINER_CONTAINER`` / ``SINGULARITY_CONTAINER`` in the environment
  (set by the runtime for the contained process).
* Slurm: ``SLURM_JOB_ID`` in the environment (a scheduler, not a container; its /dev/shm is
  the node's unless job_container/tmpfs is configured, config_formats.md section 7).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from shmguard.inspect._read import under
from shmguard.model.host import RuntimeFacts

#: Priority when several markers are present: the orchestrator decides how to fix shm.
_ORDER = ("kubernetes", "podman", "docker", "apptainer", "slurm")


def detect_runtime(
    root: Path,
    environ: Mapping[str, str] | None,
    proc_cgroup: str | None,
    unreadable: tuple[str, ...] = (),
) -> RuntimeFacts:
    """Detect the runtime.

    Args:
        root: the target's filesystem root (``/``, ``/proc/<pid>/root`` or a fixture tree).
        environ: the target's environment, or None when it could not be read.
        proc_cgroup: the target's /proc/<pid>/cgroup text, or None.
        unreadable: reasons for sources that could not be read (the environment, the cgroup
            file), each ``"<path>: <error>"``.
    """
    found: dict[str, list[str]] = {name: [] for name in _ORDER}
    missed = list(unreadable)
    try:
        os.stat(root)
        root_ok = True
    except OSError as err:  # /proc/<pid>/root of a process we may not look into
        missed.append(f"{root}: {(err.strerror or str(err)).lower()}")
        root_ok = False

    def exists(path: str) -> bool:
        if not root_ok:
            return False
        try:
            os.lstat(under(root, path))
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as err:
            missed.append(f"{path}: {(err.strerror or str(err)).lower()}")
            return False

    environ = environ or {}
    if "KUBERNETES_SERVICE_HOST" in environ:
        found["kubernetes"].append("env KUBERNETES_SERVICE_HOST")
    if exists("/var/run/secrets/kubernetes.io/serviceaccount"):
        found["kubernetes"].append("/var/run/secrets/kubernetes.io/serviceaccount exists")
    if exists("/run/.containerenv"):
        found["podman"].append("/run/.containerenv exists")
    if environ.get("container") == "podman":
        found["podman"].append("env container=podman")
    if exists("/.dockerenv"):
        found["docker"].append("/.dockerenv exists")
    for var in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        if var in environ:
            found["apptainer"].append(f"env {var}")
    if "SLURM_JOB_ID" in environ:
        found["slurm"].append("env SLURM_JOB_ID")
    for line in (proc_cgroup or "").splitlines():
        path = line.split(":", 2)[-1]
        if "kubepods" in path and not found["kubernetes"]:
            found["kubernetes"].append(f"cgroup path {path}")
        elif ("/docker/" in path or "/docker-" in path) and not found["docker"]:
            found["docker"].append(f"cgroup path {path}")
        elif "libpod" in path and not found["podman"]:
            found["podman"].append(f"cgroup path {path}")
    name = next((n for n in _ORDER if found[n]), "unknown" if missed else "none")
    evidence = tuple(e for n in _ORDER for e in found[n])
    evidence += tuple(f"could not read {m}" for m in dict.fromkeys(missed))
    return RuntimeFacts(name, evidence)

"""SHM007 dshm-not-mounted: a pod defines a memory-backed emptyDir for /dev/shm, but the ML
container that needs it does not mount it at /dev/shm.

An emptyDir is a pod volume: a container sees it only where its own ``volumeMounts`` put it
(Kubernetes docs, Volumes: "each Container in the Pod's configuration must independently
specify where to mount each volume"). A ``dshm`` mounted at /dev/shm in a sidecar or an init
container, or mounted nowhere, leaves the training container with the runtime's 64 MiB.
"Meant for /dev/shm" is what :func:`shmguard.fix.k8s_yaml.reusable_volume` reuses: a
memory emptyDir some container mounts at /dev/shm, else one no container mounts. A memory
emptyDir mounted elsewhere (``/tmp``, a cache) is not one (lint_traps.md). SHM001 leaves these
containers to this rule (one finding per fact).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.fix.k8s_yaml import shm_mount_edits
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    container_memory_limit,
    fix_size,
    mounts_at_shm,
    sources,
)
from shmguard.lint.config._predicates import unmounted_shm_volume
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Volume
from shmguard.units import DOCKER_DEFAULT_SHM


def _where(pod: PodSpec, v: Volume) -> str:
    users = [
        ("init container " if c.init else "container ") + repr(c.name)
        for c in (*pod.containers, *pod.init_containers)
        if mounts_at_shm(c, v.name)
    ]
    if not users:
        return "is mounted by no container"
    return "is mounted at /dev/shm only in " + ", ".join(users)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag each ML container that lacks the pod's /dev/shm emptyDir at /dev/shm."""
    pod = unit.pod
    if pod is None:
        return
    for c, wl in unit.containers:
        v = unmounted_shm_volume(unit, c, wl)
        if v is None:
            continue
        who = f"container {c.name!r}" if c.name else "the container"
        role = f" ({pod.role})" if pod.role else ""
        size = fix_size(options, wl, container_memory_limit(c)) or DOCKER_DEFAULT_SHM
        edits = shm_mount_edits(pod, c, size)
        node = c.node.get("name") or c.image or c.node
        yield Violation(
            f"{pod.obj.kind} {pod.obj.name or ''}{role}: the memory emptyDir {v.name!r} "
            f"{_where(pod, v)}, not in {who}, an ML workload: its /dev/shm is the runtime's "
            "64 MiB".replace("  ", " "),
            node.location(),
            Fix(
                f"Mount {v.name!r} at /dev/shm in {who}",
                f"Add `{{name: {v.name}, mountPath: /dev/shm}}` to the volumeMounts of {who} "
                "(an emptyDir is shared by the containers of the pod that mount it).",
                (),
                edits or (),
                Applicability.SAFE if edits else Applicability.DISPLAY_ONLY,
            ),
        )


DOC = RuleDoc(
    what=f"""\
A Kubernetes pod (any workload kind that holds a pod template) with a memory-backed emptyDir
meant for /dev/shm (one that some container mounts at /dev/shm, or one no container mounts)
and an ML container (PyTorch, NCCL or an inference server, as for SHM001) that does not
mount it at /dev/shm: the volume is mounted only in a sidecar or an init container, or
nowhere. A memory emptyDir mounted elsewhere (`/tmp`, `/run/lock`, a cache) is not this.
Not flagged: KubeRay pods, MPIJob launchers, `hostIPC: true`, TrainJobs (the pod spec is in
the runtime). SHM001 does not report these containers again. Kubernetes docs, Volumes
(a volume is mounted in each container that lists it in `volumeMounts`) and emptyDir.
Sources: {sources("kubernetes")}.
""",
    why="""\
A pod volume reaches only the containers that mount it. The volume is there, sized and
memory-backed, yet the training container's /dev/shm is still the runtime's 64 MiB, and the
job dies with `Bus error` or `No space left on device` as if nothing had been done.""",
    fix="""\
Mount the volume at /dev/shm in the ML container:
`volumeMounts: [{name: dshm, mountPath: /dev/shm}]`.
""",
    fix_safety="""\
Safe: `--fix` adds one `volumeMounts` entry (last in the container's, the key added when absent)
in the file's block or flow style and line endings; the volume and its `sizeLimit` stay. Its
pages are charged to the container's memory limit only when written. Containers and pods
reached through YAML anchors get the fix shown, not applied.""",
    applies="safe",
    bad=Example(
        "pod.yaml",
        """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
      command: [torchrun, --nproc-per-node=4, train.py]
    - name: log-shipper
      image: fluent/fluent-bit:3.0
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 8Gi}
""",
    ),
    good=Example(
        "pod.yaml",
        """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
      command: [torchrun, --nproc-per-node=4, train.py]
      volumeMounts:
        - name: dshm
          mountPath: /dev/shm
    - name: log-shipper
      image: fluent/fluent-bit:3.0
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 8Gi}
""",
    ),
)

RULE = Rule(
    code="SHM007",
    name="dshm-not-mounted",
    summary=(
        "A /dev/shm emptyDir defined in the pod but not mounted at /dev/shm in the ML container"
    ),
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "A pod volume reaches only the containers that mount it: the ML container without the "
        "mount keeps the runtime's 64 MiB /dev/shm."
    ),
    doc=DOC,
    check=check,
)

"""SHM009 size-limit-above-memory-limit: a memory emptyDir's ``sizeLimit`` above the memory
limit of the container that mounts it at /dev/shm.

tmpfs pages are charged to the writer's memory cgroup (kernel
``Documentation/admin-guide/cgroup-v2.rst`` "Memory Ownership"; config_formats.md 1.3, 4.2), so
the container is OOM-killed (SIGKILL, exit 137: runtime_truth.md A2, H) long before /dev/shm is
full, and the kubelet caps the tmpfs at the pod limit anyway.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, sized_shm_mounts, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix
from shmguard.units import format_iec


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a sizeLimit above the memory limit of a container mounting it at /dev/shm."""
    for v, node, size, c, limit in sized_shm_mounts(unit):
        if size <= limit:
            continue
        yield Violation(
            f"volume {v.name!r}: sizeLimit {node.value} ({format_iec(size)}) is above the "
            f"memory limit of container {c.name!r} ({format_iec(limit)}): shm pages are "
            "charged to that limit, so the container is OOM-killed first",
            node.location(),
            Fix(
                "Raise the memory limit or lower sizeLimit",
                f"Raise the memory limit of container {c.name!r} to at least "
                f"{format_iec(size)} plus what the job uses besides /dev/shm and a margin, "
                "or lower sizeLimit.",
            ),
        )


DOC = RuleDoc(
    what=f"""\
A memory-backed emptyDir mounted at /dev/shm whose `sizeLimit` is larger than the
`resources.limits.memory` of a container that mounts it. Sources: {sources("kubernetes")}.
""",
    why="""\
tmpfs pages are charged to the memory cgroup of the container that writes them: the container is
OOM-killed (exit 137, often with no message) before /dev/shm is full, and the kubelet caps the
tmpfs at the pod's memory limit anyway. The sizeLimit only looks generous.""",
    fix="""\
Raise the memory limit to the non-shm use plus the sizeLimit plus a margin (the sizing policy:
25% of the non-shm part, at least 1 GiB), or lower `sizeLimit`.
""",
    fix_safety="""\
Display-only: which of the two to change depends on the job.""",
    applies="display-only",
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
      resources: {limits: {memory: 4Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 16Gi}
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
      resources: {limits: {memory: 20Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 16Gi}
""",
    ),
)

RULE = Rule(
    code="SHM009",
    name="size-limit-above-memory-limit",
    summary="A /dev/shm emptyDir sizeLimit above the container's memory limit",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("kubernetes",),
    why=(
        "Shared-memory pages count against the container's memory limit: it is OOM-killed "
        "before /dev/shm is full, so the sizeLimit promises memory the container cannot use."
    ),
    doc=DOC,
    check=check,
)

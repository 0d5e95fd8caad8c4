"""SHM008 unbounded-memory-emptydir: a memory-backed emptyDir at /dev/shm with no ``sizeLimit``,
in containers that have no memory limit.

The kubelet sizes the tmpfs from node allocatable memory, then the pod memory limit (only when
every container has one), then ``sizeLimit`` (``pkg/volume/emptydir/empty_dir.go``
``calculateEmptyDirMemorySize``; config_formats.md 4.2). The pages are charged to the writing
container's memory cgroup, so a container memory limit bounds what it can write; with neither,
a runaway writer takes node memory ("without a memory limit it can consume node memory and
cause node OOM": website ``manage-resources-containers.md#memory-backed-emptydir``).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.estimate.policy import Sized
from shmguard.fix.k8s_yaml import add_size_limit
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    fix_sized,
    mounts_at_shm,
    sources,
    with_size_problem,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import text
from shmguard.sources.yamlnode import YMap, YNode
from shmguard.units import format_iec, format_k8s_quantity


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a memory emptyDir at /dev/shm without sizeLimit, mounted by containers without a
    memory limit."""
    pod = unit.pod
    if pod is None or "kuberay" in pod.notes:
        return
    for v in pod.volumes:
        if v.empty_dir is None or text(v.medium) != "Memory" or v.size_limit is not None:
            continue
        users = [c for c, _ in unit.containers if mounts_at_shm(c, v.name)]
        if not users or any(c.memory_limit is not None for c in users):
            continue
        names = ", ".join(repr(c.name) for c in users)
        wl = next((w for c, w in unit.containers if c in users and w.cls == "ml"), unit.workload)
        message = (
            f"volume {v.name!r} (medium: Memory, at /dev/shm in {names}) has no sizeLimit and "
            "the container has no memory limit: the tmpfs is bounded only by node memory"
        )
        sized = fix_sized(options, wl, None)  # no memory limit: never "no room"
        yield Violation(
            with_size_problem(message, sized),
            v.medium.location() if v.medium is not None else v.node.location(),
            _fix(pod, v.empty_dir, sized),
        )


def _fix(pod: PodSpec, empty_dir: YNode | None, sized: Sized) -> Fix:
    size = sized.bytes
    edit = add_size_limit(pod, empty_dir, size) if isinstance(empty_dir, YMap) else None
    if edit is None:
        return Fix(
            "Set a sizeLimit",
            "Set `sizeLimit` on the emptyDir (e.g. 1Gi, measured with `shmguard measure`), "
            "and a memory limit on the container that leaves room beside it.",
        )
    # A size the user chose is applied with --fix; the policy's default is a guess that may be
    # below what the job now uses (the tmpfs was bounded only by node memory): --unsafe-fixes.
    explicit = sized.source in ("flag", "configured")
    return Fix(
        f"Set sizeLimit: {format_k8s_quantity(size)}",
        f"Bound the tmpfs at {format_iec(size)} (--shm-size, the shmguard.io/shm-size "
        "annotation, the DataLoader model's size for shmguard.io/dataloader, else the sizing "
        "policy's default; measure the real need with `shmguard measure`), and give the "
        "container a memory limit that leaves room beside it.",
        (Change(Setting.SHM_SIZE, size, ("kubernetes",)),),
        (edit,),
        Applicability.SAFE if explicit else Applicability.UNSAFE,
    )


DOC = RuleDoc(
    what=f"""\
An `emptyDir: {{medium: Memory}}` mounted at /dev/shm without `sizeLimit`, where no container
that mounts it has `resources.limits.memory`. KubeRay pods are left to the operator.
Sources: {sources("kubernetes")}.
""",
    why="""\
The kubelet sizes such a tmpfs to the node's allocatable memory (or the pod limit when every
container has one). Files in it are charged to the writer's memory cgroup; without a memory
limit nothing stops a leaking DataLoader or a full cache from taking the node's memory and
triggering node-level OOM kills of other pods.""",
    fix="""\
Set `sizeLimit` (measured with `shmguard measure`), and a container memory limit that leaves
room beside it. The fix adds `sizeLimit` as the emptyDir's last key: `check --shm-size`, else
the `shmguard.io/shm-size` annotation, else the DataLoader model's size for the
`shmguard.io/dataloader` parameters, else the sizing policy's default (1 GiB).
""",
    fix_safety="""\
Safe when the size is yours (`--shm-size` or the `shmguard.io/shm-size` annotation): `--fix`
adds one `sizeLimit` entry, in the mapping's block or flow style, nothing else. Unsafe
(`--unsafe-fixes`) with the sizing policy's default: the tmpfs was bounded only by node memory,
and a job that uses more than the default would now fail with ENOSPC or SIGBUS.""",
    applies="safe (your size) / unsafe (the default)",
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
      command: [python, train.py]
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory}
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
      command: [python, train.py]
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 1Gi}
""",
    ),
)

RULE = Rule(
    code="SHM008",
    name="unbounded-memory-emptydir",
    summary="Memory emptyDir at /dev/shm with neither sizeLimit nor a memory limit",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "With neither a sizeLimit nor a memory limit the tmpfs is as large as the node's "
        "allocatable memory: a leaking writer takes the node's memory, not just its own."
    ),
    doc=DOC,
    check=check,
)

"""SHM006 emptydir-medium-not-memory: ``emptyDir.medium`` that is not exactly ``Memory``.

The API server does not validate ``medium`` (k8s.io/api ``StorageMedium``; only a negative
``sizeLimit`` is refused): ``medium: memory`` is admitted and fails in the kubelet with
``unknown storage medium "memory"`` (``pkg/volume/emptydir/empty_dir.go`` ``SetUpAt``), leaving
the pod in ContainerCreating (config_formats.md 4.2). Valid: ``""`` (disk), ``Memory``,
``HugePages`` and ``HugePages-<size>`` (lint_traps.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, replace_scalar, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.sources.yamlnode import YScalar

_MEANT_MEMORY = ("ram", "tmpfs", "shm", "mem", "inmemory", "in-memory")


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag an emptyDir medium other than "", Memory and HugePages[-<size>]."""
    pod = unit.pod
    if pod is None:
        return
    for v in pod.volumes:
        node = v.medium
        if not isinstance(node, YScalar) or node.placeholder:
            continue
        value = node.value
        if value in ("", "Memory") or value == "HugePages" or value.startswith("HugePages-"):
            continue
        same = value.strip().lower() == "memory"
        edit = replace_scalar(node, "Memory") if same or value.lower() in _MEANT_MEMORY else None
        applicability = Applicability.SAFE if same else Applicability.UNSAFE
        yield Violation(
            f"volume {v.name!r}: emptyDir medium {value!r} is not a storage medium the kubelet "
            'knows (only "", Memory, HugePages): the pod stays in ContainerCreating',
            node.location(),
            Fix(
                "Write medium: Memory",
                "Write `medium: Memory` (exactly, capital M) for a tmpfs.",
                (),
                (edit,) if edit is not None else (),
                applicability if edit is not None else Applicability.DISPLAY_ONLY,
            ),
        )


DOC = RuleDoc(
    what=f"""\
An `emptyDir.medium` other than `""`, `Memory`, `HugePages` or `HugePages-<size>`: `memory`,
`MEMORY`, `RAM`, `tmpfs`. Sources: {sources("kubernetes")}.
""",
    why="""\
Kubernetes does not validate the medium on admission, so `kubectl apply` and schema validators
accept it; the kubelet then fails the volume with `unknown storage medium "memory"` and the pod
never starts.""",
    fix="""\
Write `medium: Memory`.
""",
    fix_safety="""\
Safe for a case difference (`memory`, `MEMORY`): only the value's text changes. Unsafe for
`RAM`, `tmpfs` and the like (applied only with `--unsafe-fixes`): that they meant memory is a
guess, though the only one that makes the pod start.""",
    applies="safe / unsafe",
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
      emptyDir: {medium: memory, sizeLimit: 2Gi}
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
      emptyDir: {medium: Memory, sizeLimit: 2Gi}
""",
    ),
)

RULE = Rule(
    code="SHM006",
    name="emptydir-medium-not-memory",
    summary="emptyDir medium not exactly Memory (memory, RAM, tmpfs): the pod never starts",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "The API server admits any medium, then the kubelet fails the mount with 'unknown "
        "storage medium' and the pod stays in ContainerCreating."
    ),
    doc=DOC,
    check=check,
)

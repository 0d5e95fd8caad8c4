"""SHM004 milli-memory-quantity: ``64m`` in a Kubernetes memory quantity is 64 *milli*bytes.

apimachinery ``quantity.go``: ``m`` is the decimal milli suffix; ``Value()`` rounds up, so
``sizeLimit: 64m`` gives a tmpfs of ``size=1`` (one 4 KiB page) and any use trips the emptyDir
eviction check; ``memory: 512m`` is a 1-byte limit the container cannot start under
(config_formats.md 4.3, kubectl v1.32.4 run: ``2m->2m (0.002 B)``).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    edit_fix,
    pod_quantities,
    replace_scalar,
    sources,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.units import MiB, SizeError, format_k8s_quantity, parse_k8s_quantity


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag ``<n>m`` memory quantities."""
    for what, node in pod_quantities(unit):
        value = node.value.strip()
        if node.placeholder or not value.endswith("m"):
            continue
        try:
            q = parse_k8s_quantity(value)
        except SizeError:
            continue
        number = value[:-1]
        meant = int(q * 1000 * MiB) if (q * 1000 * MiB).denominator == 1 else None
        new = format_k8s_quantity(meant) if meant else None
        edit = replace_scalar(node, new) if new else None
        yield Violation(
            f"{what}: {node.value!r} is {number} millibytes ({float(q):g} bytes), not "
            f"mebibytes" + (f"; write {new}" if new else ""),
            node.location(),
            edit_fix(
                f"Write {new}",
                f"Write {new} ({number} MiB), what `{value}` means in Docker's syntax.",
                (),
                edit,
            )
            if new
            else None,
        )


DOC = RuleDoc(
    what=f"""\
A Kubernetes memory quantity (`emptyDir.sizeLimit`, `resources.{{limits,requests}}.memory`)
with the suffix `m`, which is milli: `64m` = 0.064 bytes. Sources: {sources("kubernetes")}.
""",
    why="""\
The kubelet rounds the quantity up to whole bytes: `sizeLimit: 64m` mounts a tmpfs of
`size=1`, one 4 KiB page, and the first write over 0.064 bytes also trips emptyDir eviction; a
memory limit of `512m` is one byte. Docker's `64m` (64 MiB) is the usual source of the mistake.""",
    fix="""\
Write the mebibytes meant: `64m` -> `64Mi`, `1.5m` -> `1536Ki`.
""",
    fix_safety="""\
Safe: nobody sizes memory in millibytes; the value becomes the Docker reading of the same text
(mebibytes), replaced inside its quotes; nothing else changes.""",
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
      command: [python, train.py]
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: 512m
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
      emptyDir:
        medium: Memory
        sizeLimit: 512Mi
""",
    ),
)

RULE = Rule(
    code="SHM004",
    name="milli-memory-quantity",
    summary="A memory quantity in milli (64m = 0.064 bytes) where Mi was meant",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "In a Kubernetes quantity `m` is milli: `sizeLimit: 64m` is 0.064 bytes, a one-page "
        "/dev/shm that is full at once; `memory: 512m` is a limit of one byte."
    ),
    doc=DOC,
    check=check,
)

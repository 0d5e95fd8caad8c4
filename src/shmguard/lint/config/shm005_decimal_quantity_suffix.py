"""SHM005 decimal-quantity-suffix: a decimal Kubernetes suffix (``16G``) where binary (``16Gi``)
is likely meant, or an exa (``E``) quantity.

apimachinery ``resource.Quantity`` (``quantity.go``) reads ``k M G T P E`` as powers of 1000
and ``Ki Mi Gi Ti Pi Ei`` as powers of 1024: ``16G`` is 16,000,000,000 bytes, 7 % less than
``16Gi``. Both are valid, so the rule only speaks where the pod itself shows the author's habit
(another memory quantity of the same pod in binary units) and is info only. ``E`` is 10^18:
no node has an exabyte of memory, so it is a typo (``2E`` for ``2Gi``) whatever the rest says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, pod_quantities, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix

_DECIMAL = re.compile(r"^\s*(\d+(?:\.\d+)?)([kMGTP])\s*$")
_EXA = re.compile(r"^\s*\d+(?:\.\d+)?E\s*$")
_BINARY = re.compile(r"^\s*\d+(?:\.\d+)?[KMGTPE]i\s*$")


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag decimal suffixes in a pod whose other memory quantities are binary, and ``E``."""
    quantities = [(w, n) for w, n in pod_quantities(unit) if not n.placeholder]
    binary = [n for _, n in quantities if _BINARY.match(n.value)]
    for what, node in quantities:
        if _EXA.match(node.value):
            yield Violation(
                f"{what}: {node.value!r} is {node.value.strip()[:-1]} exabytes (10^18 bytes): "
                "almost certainly a typo for Gi or Mi",
                node.location(),
            )
            continue
        m = _DECIMAL.match(node.value)
        if m is None or not binary:
            continue
        suggested = f"{m.group(1)}{m.group(2).upper()}i"
        other = binary[0]
        yield Violation(
            f"{what}: {node.value!r} is decimal ({m.group(1)} x 10^"
            f"{3 * ('kMGTP'.index(m.group(2)) + 1)} bytes) while {other.value.strip()!r} in the "
            f"same pod is binary; if {suggested} is meant, write {suggested}",
            node.location(),
            Fix(
                f"Write {suggested} if binary is meant",
                f"Write {suggested} ({m.group(2)} is a power of 1000, {m.group(2).upper()}i a "
                "power of 1024), or keep the decimal value if it is intended.",
                (),
                (),
                Applicability.DISPLAY_ONLY,
            ),
        )


DOC = RuleDoc(
    what=f"""\
A Kubernetes memory quantity (`emptyDir.sizeLimit`, `resources.limits.memory`,
`resources.requests.memory`) with a decimal suffix (`k`, `M`, `G`, `T`, `P`) in a pod where
another memory quantity has a binary one (`Ki` ... `Ei`), so binary was likely meant; and any
quantity with the exa suffix `E` (10^18 bytes). Decimal quantities in a pod that uses no binary
ones are not flagged: they are valid and may be meant. Info only. Sources: {sources("kubernetes")}.
""",
    why="""\
`16G` is 16,000,000,000 bytes and `16Gi` 17,179,869,184: a /dev/shm `sizeLimit: 16G` next to
`limits.memory: 16Gi` is about 1.1 GiB smaller than it looks, and sizes compared by eye across
the two styles mislead. `2E` is two exabytes, a limit that never applies.""",
    fix="""\
Write the binary suffix (`16G` -> `16Gi`, `500M` -> `500Mi`) if a power of 1024 is meant; for
`E`, write the size you mean in `Gi`.
""",
    fix_safety="""\
Display-only: `16Gi` is a different number of bytes than `16G`, and only the author knows which
was meant.""",
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
      command: [torchrun, --nproc-per-node=8, train.py]
      resources: {limits: {memory: 64Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 16G}
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
      command: [torchrun, --nproc-per-node=8, train.py]
      resources: {limits: {memory: 64Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 16Gi}
""",
    ),
)

RULE = Rule(
    code="SHM005",
    name="decimal-quantity-suffix",
    summary="A decimal quantity (16G) beside binary ones (Gi) in a pod, or an exa (E) quantity",
    severity=Severity.INFO,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "Kubernetes reads G as 10^9 and Gi as 2^30: 16G is 7 % less than 16Gi, and E (10^18) "
        "is no memory size a node has."
    ),
    doc=DOC,
    check=check,
)

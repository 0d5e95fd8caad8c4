"""SHM003 docker-suffix-in-quantity: a Docker-style size (``2g``, ``2GB``, ``512mb``, ``2K``) in a
Kubernetes memory quantity.

apimachinery ``resource.ParseQuantity`` accepts only binary ``Ki..Ei``, decimal
``m "" k M G T P E`` and ``e<n>`` (``quantity.go``; kubectl v1.32.4 run in config_formats.md
4.3): ``2g``, ``2GB``, ``2gi`` fail the regex and ``2K`` fails with ``unable to parse quantity's
suffix``, so the API server rejects the object.
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
from shmguard.units import SizeError, format_k8s_quantity, parse_docker_size, parse_k8s_quantity


def docker_style(value: str) -> tuple[int, str] | None:
    """(bytes as go-units reads it, the apimachinery error) when ``value`` is not a valid
    quantity but is a Docker size with a unit; else None."""
    try:
        parse_k8s_quantity(value)
        return None
    except SizeError as e:
        err = str(e)
    if value.strip().isdigit():
        return None
    try:
        n = parse_docker_size(value.strip())
    except SizeError:
        return None
    return (n, err) if n > 0 else None


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag Docker-style sizes in a pod's memory quantities."""
    for what, node in pod_quantities(unit):
        if node.placeholder or not node.value.strip():
            continue
        found = docker_style(node.value)
        if found is None:
            continue
        n, err = found
        new = format_k8s_quantity(n)
        edit = replace_scalar(node, new)
        yield Violation(
            f"{what}: {node.value!r} is Docker syntax, not a Kubernetes quantity ({err}); "
            f"write {new}",
            node.location(),
            edit_fix(
                f"Write {new}",
                f"Write {new}: the bytes Docker would read from {node.value!r} (binary units).",
                (),
                edit,
            ),
        )


DOC = RuleDoc(
    what=f"""\
A Kubernetes memory quantity (`emptyDir.sizeLimit`, `resources.limits.memory`,
`resources.requests.memory`) written in Docker's go-units syntax: `2g`, `2gb`, `2GB`, `512mb`,
`2K`. Sources: {sources("kubernetes")}.
""",
    why="""\
The API server (and a CRD's OpenAPI pattern) rejects the object: `quantities must match the
regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`, or `unable to parse
quantity's suffix` for `2K`. A schema validator that only checks "string" lets it through.""",
    fix="""\
Write the bytes Docker meant in binary quantity syntax: `2g` -> `2Gi`, `512mb` -> `512Mi`.
""",
    fix_safety="""\
Safe: go-units units are binary, so `2g` meant 2 GiB and `2Gi` is exactly that; the value is
replaced inside its quotes and nothing else changes.""",
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
      resources: {limits: {memory: 16Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 2g}
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
      resources: {limits: {memory: 16Gi}}
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 2Gi}
""",
    ),
)

RULE = Rule(
    code="SHM003",
    name="docker-suffix-in-quantity",
    summary="A Docker-style size (2g, 2GB) in a Kubernetes memory quantity, which the API rejects",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why=(
        "Kubernetes quantities take Ki/Mi/Gi or k/M/G: `2g` or `2GB` fails validation and the "
        "object is rejected (quantities must match the regular expression ...)."
    ),
    doc=DOC,
    check=check,
)

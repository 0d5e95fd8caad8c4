"""SHM017 deploy-memory-integer: ``deploy.resources.limits.memory`` written as a YAML integer.

The compose-spec schema types it as a string: compose-go fails with
``services.a.deploy.resources.limits.memory must be a string`` (config_formats.md 2.2 [run]),
Compose v1 with ``... contains an invalid type, it should be a string``; podman-compose has no
schema and passes it to ``podman -m`` (runtime_truth.md E, F).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, edit_fix, replace_scalar, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.sources.compose_types import typed
from shmguard.sources.yamlnode import YScalar


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag an integer ``deploy.resources.limits.memory`` (and ``reservations.memory``)."""
    svc = unit.service
    if svc is None:
        return
    t = options.target
    tool = t.name("compose")
    for field in ("deploy.resources.limits.memory", "deploy.resources.reservations.memory"):
        node = svc.get(field)
        if not isinstance(node, YScalar) or node.placeholder or not node.plain:
            continue
        v = typed(node, t.compose)
        if not isinstance(v, int) or isinstance(v, bool):
            continue
        if t.compose == "podman-compose":
            effect = "podman-compose passes it on (it has no schema), other Compose refuse it"
        else:
            effect = f"{tool} refuses the file ({field} must be a string)"
        edit = replace_scalar(node, f'"{v}"') if v > 0 and str(v) == node.value else None
        yield Violation(
            f"{field}: {node.value} is an integer: {effect} (target {tool})",
            node.location(),
            edit_fix(
                f'Write "{v}"',
                'Quote the value (integer bytes as a string) or write it with a unit ("2g").',
                (),
                edit,
            ),
        )


DOC = RuleDoc(
    what=f"""\
`deploy.resources.limits.memory` (or `reservations.memory`) written as a YAML integer
(`268435456`) in a Compose file. Under podman-compose it works (no schema), so the finding
says so when `--target compose=podman-compose`.
Sources: {sources("compose")}.
""",
    why="""\
The compose-spec schema types the field as a string: `docker compose` (v2) stops with
`services.a.deploy.resources.limits.memory must be a string` and Compose v1 with `... contains
an invalid type, it should be a string`; nothing in the file runs.""",
    fix="""\
Quote it (`"17179869184"`), or write it with a unit (`"16g"`).
""",
    fix_safety="""\
Safe: `--fix` quotes the same digits; compose-go reads a digit string with `ParseInt`, so the
limit is the same number of bytes.""",
    applies="safe",
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 2g
    deploy: {resources: {limits: {memory: 17179869184}}}
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 2g
    deploy: {resources: {limits: {memory: "17179869184"}}}
""",
    ),
)

RULE = Rule(
    code="SHM017",
    name="deploy-memory-integer",
    summary="Compose deploy.resources.limits.memory as an integer (the schema wants a string)",
    severity=Severity.ERROR,
    fix=FixAvailability.ALWAYS,
    targets=("compose",),
    why="Compose v2 and v1 refuse the whole file: deploy.resources.limits.memory must be a string.",
    doc=DOC,
    check=check,
)

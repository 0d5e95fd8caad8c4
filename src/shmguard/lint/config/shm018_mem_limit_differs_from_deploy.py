"""SHM018 mem-limit-differs-from-deploy: ``mem_limit`` and ``deploy.resources.limits.memory``
with different values.

compose-go refuses it: ``can't set distinct values on 'mem_limit' and
'deploy.resources.limits.memory'`` (``loader/validate.go``; config_formats.md 2.2 [run]);
Compose v1 and podman-compose accept it and apply the deploy value, silently
(runtime_truth.md E, F).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.sources.yamlnode import YScalar
from shmguard.units import SizeError, parse_docker_size


def _bytes(node: YScalar, legacy: bool) -> int | None:
    try:
        return parse_docker_size(node.value, legacy=legacy)
    except SizeError:
        return None


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a service whose ``mem_limit`` and deploy memory limit name different bytes."""
    svc = unit.service
    if svc is None:
        return
    a, b = svc.mem_limit, svc.deploy_memory
    if not isinstance(a, YScalar) or not isinstance(b, YScalar) or a.placeholder or b.placeholder:
        return
    t = options.target
    legacy = t.compose != "v2"
    na, nb = _bytes(a, legacy), _bytes(b, legacy)
    if na is None or nb is None or na == nb:
        return
    tool = t.name("compose")
    if t.compose == "v2":
        effect = f"{tool} refuses the file (can't set distinct values)"
    else:
        effect = f"{tool} applies the deploy value ({b.value}) and ignores mem_limit"
    yield Violation(
        f"mem_limit {a.value} and deploy.resources.limits.memory {b.value} differ: {effect} "
        f"(target {tool})",
        a.location(),
    )


DOC = RuleDoc(
    what=f"""\
A Compose service with both `mem_limit` and `deploy.resources.limits.memory`, naming different
byte counts. Equal values in different spellings (`1g` and `1024m`) are fine.
Sources: {sources("compose")}.
""",
    why="""\
`docker compose` (v2) stops with `can't set distinct values on 'mem_limit' and
'deploy.resources.limits.memory'`. Compose v1 and podman-compose take the deploy value without
a word, so a reader (and a /dev/shm size checked against `mem_limit`) sees the wrong limit.""",
    fix="""\
Keep one of the two (the deploy form works in v2, v1 and podman-compose).
""",
    fix_safety="""\
Display-only: which limit is meant is the author's to say.""",
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 2g
    mem_limit: 8g
    deploy: {resources: {limits: {memory: 16g}}}
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
    deploy: {resources: {limits: {memory: 16g}}}
""",
    ),
)

RULE = Rule(
    code="SHM018",
    name="mem-limit-differs-from-deploy",
    summary="Compose mem_limit and deploy.resources.limits.memory differ",
    severity=Severity.ERROR,
    fix=FixAvailability.NONE,
    targets=("compose",),
    why=(
        "Compose v2 refuses distinct mem_limit and deploy memory; Compose v1 and podman-compose "
        "silently apply the deploy value, so the limit you read in mem_limit is not the one set."
    ),
    doc=DOC,
    check=check,
)

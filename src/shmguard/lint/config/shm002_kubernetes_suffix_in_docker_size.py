"""SHM002 kubernetes-suffix-in-docker-size: ``2Gi`` in a Docker / Compose / Podman byte value.

go-units ``RAMInBytes`` v0.5 (Docker CLI >= 23, compose-go, moby) rejects ``Gi`` with
``invalid suffix: 'gi'``; v0.4 (Docker CLI 20.10, Podman 4.x) accepts it as binary (runtime
truth B, G); Compose v1 (docker-py ``parse_bytes``) stops with a traceback (runtime_truth.md E);
podman-compose passes the text to Podman, which accepts it (F). The fix writes the same bytes in
go-units' own syntax, which every one of them reads alike (``2Gi`` -> ``2g``: go-units is
binary).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import (
    COMPOSE_SIZE_FIELDS,
    RUN_SIZE_FLAGS,
    CheckOptions,
    Unit,
    edit_fix,
    flag_loc,
    replace_flag_value,
    replace_scalar,
    sources,
)
from shmguard.lint.config._predicates import k8s_suffixed
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Edit, Fix, Location
from shmguard.model.fix import Change, Setting
from shmguard.sources.yamlnode import YNode, YScalar, YSeq
from shmguard.units import format_docker_size


def _fix(n: int, edit: Edit | None, what: str) -> Fix:
    new = format_docker_size(n)
    return edit_fix(
        f"Write {new}",
        f"Write {what} as {new} (the same bytes: go-units is binary, 1g = 1 GiB).",
        (Change(Setting.SHM_SIZE, n),) if n > 0 and "shm" in what else (),
        edit,
    )


def _compose_nodes(unit: Unit) -> Iterator[tuple[str, YScalar]]:
    svc = unit.service
    assert svc is not None
    for name in COMPOSE_SIZE_FIELDS:
        node = svc.get(name)
        if isinstance(node, YScalar):
            yield name, node
    vols = svc.get("volumes")
    if isinstance(vols, YSeq):
        for m in svc.mounts:
            if m.size is not None and isinstance(m.size, YScalar):
                yield "volumes[].tmpfs.size", m.size


def _yaml(unit: Unit) -> Iterator[Violation]:
    for name, node in _compose_nodes(unit):
        if node.placeholder or node.style in ("literal", "folded"):
            continue
        n = k8s_suffixed(node.value)
        if n is None:
            continue
        new = format_docker_size(n)
        yield Violation(
            f"{name}: {node.value!r} has a Kubernetes suffix: Compose v2 (compose-go) and "
            f"Docker CLI 23+ reject it (invalid suffix: '{node.value.strip()[-2:].lower()}'), "
            f"Compose v1 stops with a traceback; write {new}",
            _where(node),
            _fix(n, replace_scalar(node, new), name),
        )


def _where(node: YNode) -> Location:
    return node.location()


def _run(unit: Unit) -> Iterator[Violation]:
    rl = unit.run
    assert rl is not None
    for f in rl.flags.named(*RUN_SIZE_FLAGS):
        if f.value is None:
            continue
        n = k8s_suffixed(f.value)
        if n is None:
            continue
        new = format_docker_size(n)
        if rl.tool == "podman":
            msg = (
                f"{f.spelled} {f.value}: Podman 4.x reads the Kubernetes suffix as binary, but "
                f"docker CLI 23+ rejects it (invalid suffix); {new} works in both"
            )
            variant: str | None = "podman-line"
        else:
            msg = (
                f"{f.spelled} {f.value}: docker CLI 23+ rejects the Kubernetes suffix (invalid "
                f"argument ... invalid suffix: '{f.value.strip()[-2:].lower()}'); only CLI 20.10 "
                f"read it; write {new}"
            )
            variant = None
        yield Violation(
            msg, flag_loc(unit, f), _fix(n, replace_flag_value(unit.src, f, new), f.name), variant
        )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag Kubernetes binary suffixes in go-units fields."""
    if unit.kind == "compose":
        yield from _yaml(unit)
    elif unit.kind == "run":
        yield from _run(unit)


DOC = RuleDoc(
    what=f"""\
A size with a Kubernetes binary suffix (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`) in a field Docker's
go-units parses: Compose `shm_size`, `mem_limit`, `memswap_limit`, `mem_reservation`,
`build.shm_size`, `deploy.resources.{{limits,reservations}}.memory`, a tmpfs volume's
`tmpfs.size`; `docker|podman run --shm-size`, `--memory`, `--memory-swap`,
`--memory-reservation`. The target matters: go-units v0.5 (Docker CLI 23 and later, 28 was
run; compose-go) rejects it, v0.4 (Docker CLI 20.10, Podman 4.3, both run) reads it as binary,
Compose v1 (docker-py) fails. `2GiB` is accepted by all and not flagged.
Sources: {sources("compose", "docker-run", "podman-run")}.
""",
    why="""\
With a current Docker CLI or Compose v2 the command or `docker compose up` fails outright
(`invalid argument "2Gi" for "--shm-size" flag: invalid suffix: 'gi'`); a file that worked with
Docker 20.10 or Podman breaks on upgrade.""",
    fix="""\
Write the same bytes in go-units syntax: `2Gi` -> `2g`, `512Mi` -> `512m` (go-units is binary:
`1g` = 1 GiB).
""",
    fix_safety="""\
Safe: the value is replaced inside its quotes with one that means the same bytes to every
Docker, Compose and Podman version; nothing else in the file changes. On Podman lines (which
accept the suffix) the finding is info only.""",
    applies="safe",
    variant_words={"podman-line": "on Podman lines"},
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 2Gi
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
""",
    ),
)

RULE = Rule(
    code="SHM002",
    name="kubernetes-suffix-in-docker-size",
    summary=(
        "A Kubernetes suffix (2Gi) in a Docker/Compose/Podman size, which current Docker rejects"
    ),
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("compose", "docker-run", "podman-run"),
    why=(
        "Docker CLI 23+ and Compose v2 reject `2Gi` (invalid suffix: 'gi') and Compose v1 stops "
        "with a traceback; only Docker CLI 20.10 and Podman 4.x read it, as binary."
    ),
    doc=DOC,
    check=check,
    variants={"podman-line": Severity.INFO},
)

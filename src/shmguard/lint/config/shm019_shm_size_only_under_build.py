"""SHM019 shm-size-only-under-build: ``build.shm_size`` set, the service's ``shm_size`` not.

``build.shm_size`` sizes the *build* containers only (compose-spec ``build.md``); the running
container keeps 64 MiB (runtime_truth.md E). Even the build often loses it: Compose v1 1.29 with
its default ``COMPOSE_DOCKER_CLI_BUILD=1`` and podman-compose 1.6 do not pass it to the build
(runtime_truth.md A7).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.fix.runtime import compose_entry
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    change_edit,
    compose_memory_limit,
    sources,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.yamlnode import YScalar
from shmguard.units import SizeError, format_iec, parse_docker_size


def build_size(node: object) -> int | None:
    """The bytes of a ``build.shm_size`` scalar (go-units, as Compose reads it; ``2Gi`` too,
    which SHM002 flags), or None when it is no plain or quoted scalar, a placeholder,
    unreadable or zero."""
    if not isinstance(node, YScalar) or node.placeholder:
        return None
    if node.style not in ("plain", "single", "double"):
        return None
    try:
        n = parse_docker_size(node.value, legacy=True)
    except SizeError:
        return None
    return n or None


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a service with build.shm_size and no shm_size; the fix copies the build's size."""
    svc = unit.service
    if svc is None or svc.shm_size is not None:
        return
    build = svc.build_shm_size
    if build is None:
        return
    size = build_size(build)
    memory = compose_memory_limit(unit)
    change: tuple[Change, ...] = ()
    if size is None:
        line, edit = f"shm_size: {build.raw}", None
    else:
        one = Change(Setting.SHM_SIZE, size, ("compose",))
        line, edit, change = compose_entry(one), change_edit(unit, one), (one,)
    fits = size is not None and (memory is None or size + options.policy.memory_margin <= memory)
    if edit is None:
        applicability = Applicability.DISPLAY_ONLY
    else:
        applicability = Applicability.SAFE if fits else Applicability.UNSAFE
    beside = ""
    if size is not None and not fits and memory is not None:
        beside = (
            f" (the memory limit {format_iec(memory)} does not keep the "
            f"{format_iec(options.policy.memory_margin)} margin beside it)"
        )
    yield Violation(
        f"service {svc.name!r}: shm_size is only under build: the running container gets the "
        "64 MiB default",
        build.location(),
        Fix(
            f"Add {line} to the service",
            "Set `shm_size` on the service itself, to the size written under `build:`"
            f"{beside} (keep `build.shm_size` if the build needs it).",
            change,
            (edit,) if edit is not None else (),
            applicability,
        ),
    )


DOC = RuleDoc(
    what=f"""\
A Compose service with `build: {{shm_size: ...}}` and no service-level `shm_size`. Such a
service gets this finding rather than SHM001's (which would write the policy's size over
the one you chose).
Sources: {sources("compose")}.
""",
    why="""\
`build.shm_size` applies to the containers that build the image, not to the one that runs it:
the service still gets 64 MiB. Compose v1 (with its default CLI build) and podman-compose do not
even pass it to the build.""",
    fix="""\
Add `shm_size` at the service level with the bytes written under `build:`, in go-units syntax
(`8g`, `8589934592` -> `"8g"`, `'512m'` -> `"512m"`); `build.shm_size` stays.
""",
    fix_safety="""\
Safe when the service has no memory limit (`deploy.resources.limits.memory`, else
`mem_limit`) or the limit keeps the sizing policy's margin (1 GiB) beside the size: the fix
moves your own value to where it takes effect, and tmpfs pages are only charged when written,
so nothing is reserved. Unsafe (only with `--unsafe-fixes`) when the limit does not keep that
margin: a /dev/shm that fills would then push the container to its memory limit, and raising
the limit is your decision. The line goes first in the service, in block or flow style.
Display-only when the value is a placeholder (`${SHM}`), a block scalar or not a size, or the
service is reached through a YAML anchor.""",
    applies="safe (your build size) / unsafe (above the memory limit)",
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    build: {context: ., shm_size: 8g}
    command: torchrun --nproc-per-node 4 train.py
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    shm_size: "8g"
    build: {context: ., shm_size: 8g}
    command: torchrun --nproc-per-node 4 train.py
""",
    ),
)

RULE = Rule(
    code="SHM019",
    name="shm-size-only-under-build",
    summary="shm_size only under build: (sizes the build, not the running container)",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("compose",),
    why=(
        "build.shm_size sizes only the image build's containers; the running service keeps the "
        "64 MiB default (and Compose v1 and podman-compose drop it even from the build)."
    ),
    doc=DOC,
    check=check,
)

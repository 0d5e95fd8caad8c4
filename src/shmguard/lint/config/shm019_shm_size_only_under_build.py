"""SHM019 shm-size-only-under-build: ``build.shm_size`` set, the service's ``shm_size`` not.

``build.shm_size`` sizes the *build* containers only (compose-spec ``build.md``); the running
container keeps 64 MiB (runtime_truth.md E). Even the build often loses it: Compose v1 1.29 with
its default ``COMPOSE_DOCKER_CLI_BUILD=1`` and podman-compose 1.6 do not pass it to the build
(runtime_truth.md A7).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import SOURCES, CheckOptions, Unit, insert_key
from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.sources.yamlnode import YScalar
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix

CODE = "SHM019"
NAME = "shm-size-only-under-build"
SUMMARY = "shm_size only under build: (sizes the build, not the running container)"
SEVERITY = Severity.WARNING
WHY = (
    "build.shm_size sizes only the image build's containers; the running service keeps the "
    "64 MiB default (and Compose v1 and podman-compose drop it even from the build)."
)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a service with build.shm_size and no shm_size."""
    svc = unit.service
    if svc is None or svc.shm_size is not None:
        return
    build = svc.build_shm_size
    if build is None:
        return
    edit = None
    if isinstance(build, YScalar) and build.style in ("plain", "single", "double"):
        edit = insert_key(svc.node, f"shm_size: {build.raw}")
    yield Violation(
        f"service {svc.name!r}: shm_size is only under build: the running container gets the "
        "64 MiB default",
        build.location(),
        Fix(
            f"Add shm_size: {build.raw} to the service",
            "Set `shm_size` on the service itself (keep `build.shm_size` if the build needs it).",
            (),
            (edit,) if edit is not None else (),
            Applicability.UNSAFE if edit is not None else Applicability.DISPLAY_ONLY,
        ),
    )


DOC = RuleDoc(
    what=f"""\
A Compose service with `build: {{shm_size: ...}}` and no service-level `shm_size`.
Sources: {SOURCES}.
""",
    why="""\
`build.shm_size` applies to the containers that build the image, not to the one that runs it:
the service still gets 64 MiB. Compose v1 (with its default CLI build) and podman-compose do not
even pass it to the build.""",
    example="""\
```yaml
services:
  train:
    build: {context: ., shm_size: 8g}
```
Use instead:
```yaml
services:
  train:
    shm_size: 8g
    build: {context: ., shm_size: 8g}
```
""",
    fix="""\
Add `shm_size` with the same value at the service level.
""",
    fix_safety="""\
Unsafe (only with `--unsafe-fixes`): it copies the build's size to the running container, which
is the usual intent but changes what the service gets at run time.""",
)

RULE = Rule(
    CODE,
    NAME,
    SUMMARY,
    SEVERITY,
    FixAvailability.SOMETIMES,
    ("compose",),
    WHY,
    DOC,
    check,
)

"""SHM016 zero-shm-size: a /dev/shm size of 0, which means the default in Docker and no limit
in Podman.

Docker: ``--shm-size=0`` / ``shm_size: 0`` is the 64 MiB default (moby ``daemon``: 0 ->
``config.DefaultShmSize``); Podman 4.3: 0 is unlimited (docs ``options/shm-size.md``, "When
size is 0, there is no limit"); podman-compose drops an integer ``0`` (Podman's 65,536,000)
but passes the string ``"0"`` (unlimited); a tmpfs ``size=0`` is unlimited (tmpfs(5))
(runtime_truth.md B, D, F, G).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, flag_loc, is_dev_shm, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.sources.compose_types import applied_size
from shmguard.sources.yamlnode import YScalar
from shmguard.units import SizeError, parse_tmpfs_size


def _meaning(outcome: str) -> str:
    if outcome == "unlimited":
        return "no limit (bounded only by memory)"
    return "the runtime's default (64 MiB; Podman 65,536,000 bytes)"


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag ``shm_size: 0``, ``--shm-size=0`` and a tmpfs ``size=0`` at /dev/shm."""
    t = options.target
    if unit.service is not None:
        node = unit.service.shm_size
        if isinstance(node, YScalar) and not node.placeholder:
            r = applied_size(node, t.compose)
            if r.outcome in ("default", "unlimited") and str(r.value).strip() in ("0", "0.0"):
                yield Violation(
                    f"shm_size: {node.raw}: {t.name('compose')} gives /dev/shm "
                    f"{_meaning(r.outcome)} (target {t.name('compose')})",
                    node.location(),
                )
        for m in unit.service.mounts:
            if m.kind == "tmpfs" and is_dev_shm(m.target) and _zero_option(m.options):
                yield Violation(
                    "tmpfs at /dev/shm with size=0: the kernel sets no limit",
                    m.node.location(),
                )
    rl = unit.run
    if rl is None:
        return
    podman = rl.tool == "podman"
    tool = t.name("podman" if podman else "docker")
    for f in rl.flags.named("--shm-size", "--tmpfs"):
        if f.name == "--shm-size" and f.value is not None and f.value.strip() in ("0", "0b"):
            meaning = _meaning("unlimited" if podman else "default")
            yield Violation(
                f"--shm-size={f.value}: {tool} gives /dev/shm {meaning} (target {tool})",
                flag_loc(unit, f),
            )
        elif (
            f.name == "--tmpfs"
            and f.value
            and is_dev_shm(f.value.partition(":")[0])
            and _zero_option(f.value.partition(":")[2])
        ):
            yield Violation(
                "--tmpfs /dev/shm with size=0: the kernel sets no limit", flag_loc(unit, f)
            )


def _zero_option(options: str | None) -> bool:
    for opt in (options or "").split(","):
        k, _, v = opt.partition("=")
        if k.strip() == "size":
            try:
                return parse_tmpfs_size(v.strip()) == 0
            except SizeError:
                return False
    return False


DOC = RuleDoc(
    what=f"""\
`shm_size: 0`, `--shm-size=0` or a tmpfs at /dev/shm with `size=0`. What 0 means depends on the
target: Docker (and Compose v2/v1) gives its 64 MiB default; Podman gives an unlimited
/dev/shm; podman-compose drops an integer `0` (Podman's 65,536,000 bytes) but passes the
string `"0"` (unlimited); a kernel tmpfs `size=0` has no limit. Findings name the target
assumed (`--target`).
Sources: {sources("compose", "docker-run", "podman-run")}.
""",
    why="""\
Someone who writes 0 to mean "no special size" gets 64 MiB on Docker, and someone who means
"unlimited" gets it only on Podman: the same file sizes /dev/shm differently per tool. An
unlimited tmpfs lets a leaking writer take the container's (or the node's) memory.""",
    fix="""\
Write the size you mean (`--shm-size=2g`, `shm_size: "2g"`, `size=2g`).
""",
    fix_safety="""\
Display-only: whether 0 meant the default or no limit is the author's to say.""",
    bad=Example(
        "run.sh",
        """\
#!/bin/sh
podman run --shm-size=0 pytorch/pytorch python train.py
""",
    ),
    good=Example(
        "run.sh",
        """\
#!/bin/sh
podman run --shm-size=2g pytorch/pytorch python train.py
""",
    ),
)

RULE = Rule(
    code="SHM016",
    name="zero-shm-size",
    summary="A /dev/shm size of 0: the default in Docker, unlimited in Podman and in a tmpfs",
    severity=Severity.WARNING,
    fix=FixAvailability.NONE,
    targets=("compose", "docker-run", "podman-run"),
    why=(
        "0 does not mean 'none': Docker gives its 64 MiB default, Podman and a tmpfs size=0 give "
        "an unlimited /dev/shm bounded only by memory."
    ),
    doc=DOC,
    check=check,
)

"""SHM012 shm-size-ignored-by-mount: ``shm_size`` / ``--shm-size`` beside a tmpfs, bind or
volume mounted at /dev/shm.

A user mount at /dev/shm replaces the runtime's: moby ``HasMountFor("/dev/shm")`` skips the
shm mount and ``withMounts`` drops the default one (config_formats.md 1.4); run with Docker
20.10, Podman 4.3, Compose v1 and podman-compose: the mount wins and the size is unused
(runtime_truth.md D, E, F, G).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    flag_loc,
    is_dev_shm,
    run_shm_mounts,
    sources,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix

_FIX = Fix(
    "Keep one /dev/shm mechanism",
    "Drop the mount at /dev/shm and keep the size (a private tmpfs of that size), or drop the "
    "size and give the tmpfs mount a size= of its own.",
)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a shm size beside a mount at /dev/shm."""
    if unit.service is not None:
        size = unit.service.shm_size
        mounts = [m for m in unit.service.mounts if is_dev_shm(m.target)]
        if size is None or not mounts:
            return
        m = mounts[-1]
        what = "a tmpfs" if m.kind == "tmpfs" else f"a {m.kind} mount"
        yield Violation(
            f"shm_size is unused: {what} at /dev/shm (line {m.node.line}) replaces Docker's "
            "/dev/shm",
            size.location(),
            _FIX,
        )
    elif unit.run is not None:
        rl = unit.run
        size_flag = rl.last("--shm-size")
        flags = run_shm_mounts(rl)
        if size_flag is None or not flags:
            return
        last = flags[-1]
        yield Violation(
            f"--shm-size is unused: {last.spelled} {last.value} mounts /dev/shm itself and wins",
            flag_loc(unit, size_flag),
            _FIX,
        )


DOC = RuleDoc(
    what=f"""\
A Compose `shm_size` with a `tmpfs:` entry or a volume (tmpfs, bind or named) whose target is
/dev/shm; a `docker|podman run --shm-size` with `--tmpfs /dev/shm`, `-v X:/dev/shm` or
`--mount ...,dst=/dev/shm`. Sources: {sources("compose", "docker-run", "podman-run")}.
""",
    why="""\
The mount replaces the runtime's /dev/shm, so the size is silently unused: the job gets the
tmpfs mount's own size (half of RAM without `size=`), or a disk directory for a bind mount,
which makes every shared batch a file write.""",
    fix="""\
Keep one mechanism: `shm_size` alone, or the tmpfs mount with its own `size=`.
""",
    fix_safety="""\
Display-only: which of the two the author meant cannot be told from the file.""",
    applies="display-only",
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 8g
    tmpfs: [/dev/shm:size=1g]
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    tmpfs: [/dev/shm:size=8g]
""",
    ),
)

RULE = Rule(
    code="SHM012",
    name="shm-size-ignored-by-mount",
    summary="shm_size / --shm-size beside a tmpfs or bind mount at /dev/shm (the mount wins)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("compose", "docker-run", "podman-run"),
    why=(
        "A tmpfs, bind or volume mounted at /dev/shm replaces the runtime's /dev/shm: the "
        "shm_size is silently unused and the mount's own size (or the disk) is what the job gets."
    ),
    doc=DOC,
    check=check,
)

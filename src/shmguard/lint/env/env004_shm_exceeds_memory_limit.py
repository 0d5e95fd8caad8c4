"""ENV004 shm-exceeds-memory-limit: /dev/shm is larger than the memory cgroup limit.

tmpfs pages are charged to the memory cgroup that first touches them (config_formats.md 1.3).
A /dev/shm bigger than the limit can never be filled: the job is OOM-killed (or its writers get
SIGBUS) first. Docker accepts ``--shm-size`` > ``--memory`` without a word; Kubernetes silently
caps a memory emptyDir at the pod limit.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.env._base import (
    HOST_FIX_SAFETY,
    UNSIZED,
    DoctorOptions,
    memory_fix,
    needed_size,
    shm_fix,
)
from shmguard.model import Location, Severity
from shmguard.model.host import HostFacts
from shmguard.units import format_iec


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag a tmpfs /dev/shm larger than the memory limit (disk pages are not shmem)."""
    total, limit = facts.shm.total.value, facts.cgroup.memory_limit.value
    if facts.shm.fstype.value != "tmpfs" or total is None or limit is None or total <= limit:
        return
    if facts.shm.sizing.value in UNSIZED:
        # The host's half-of-RAM tmpfs: raising the limit to cover it, or copying its size into
        # --shm-size, is no fix; a private /dev/shm sized for the job is.
        size, lead = needed_size(facts, options)
        fix = shm_fix(
            facts, size, lead.replace("Size /dev/shm", "Give the job its own /dev/shm"), options
        )
    else:
        fix = memory_fix(facts, limit, total, options)
    yield Violation(
        f"/dev/shm ({format_iec(total)}) is larger than the memory limit ({format_iec(limit)})",
        Location(file=facts.cgroup.memory_dir.value),
        fix,
    )


DOC = RuleDoc(
    what="""\
A tmpfs /dev/shm larger than the memory cgroup limit (v2 `memory.max`, v1
`hierarchical_memory_limit`).
""",
    why="""\
tmpfs pages are charged to the memory cgroup of the task that first touches them, so the limit
is reached before /dev/shm is full: the job is OOM-killed or its writers get SIGBUS. Docker
accepts `--shm-size` larger than `--memory` without a word, and Kubernetes silently caps a memory
emptyDir at the pod limit ([background](background.md#runtimes)). Typical with
`--ipc=host`, where /dev/shm is the host's.
""",
    example="""\
```
WARNING ENV004 /dev/shm (~31.39 GiB) is larger than the memory limit (4 GiB)
```
""",
    fix="""\
Raise the memory limit by the size of /dev/shm (the fix prints both), or make /dev/shm smaller.
When /dev/shm is unsized (no `size=` or `size=0`: usually the host's, `--ipc=host`), raising the
limit to cover half the node's RAM or copying that size into `--shm-size` is no fix: the fix
gives the job its own sized /dev/shm under the current limit (`--shm-size=1g --memory=4g`) and
says that `--shm-size` only applies with `--ipc=private`.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV004",
    name="shm-exceeds-memory-limit",
    summary="/dev/shm is larger than the memory limit it is charged to",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "Every page written to /dev/shm counts against the container's memory limit, so the "
        "limit is reached before /dev/shm is full: the job is OOM-killed or gets SIGBUS."
    ),
    doc=DOC,
    check=check,
)

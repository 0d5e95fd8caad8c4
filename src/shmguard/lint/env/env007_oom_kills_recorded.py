"""ENV007 oom-kills-recorded: the memory cgroup has already OOM-killed something.

``memory.events`` ``oom_kill`` (v2) or ``memory.oom_control`` ``oom_kill`` (v1) counts kills
in this cgroup. shm pages are charged there, so a full /dev/shm plus the job's RSS is a usual
cause; a DataLoader worker killed this way shows as "exited unexpectedly".
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.env._base import HOST_FIX_SAFETY, DoctorOptions, memory_fix
from shmguard.model import Fix, Location, Severity
from shmguard.model.host import HostFacts


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag oom_kills > 0."""
    kills = facts.cgroup.oom_kills.value
    if not kills:
        return
    limit, total = facts.cgroup.memory_limit.value, facts.shm.total.value
    if limit is not None and total is not None:
        fix = memory_fix(facts, limit, total, options)
    else:
        fix = Fix(
            "Raise the memory limit",
            "Raise the memory limit, or lower batch size, workers or prefetch_factor.",
        )
    yield Violation(
        f"the memory cgroup has recorded {kills} OOM kill{'s' if kills != 1 else ''}",
        Location(file=facts.cgroup.memory_dir.value),
        fix,
    )


DOC = RuleDoc(
    what="""\
OOM kills already counted by the memory cgroup (v2 `memory.events` `oom_kill`, v1
`memory.oom_control` `oom_kill`).
""",
    why="""\
Something in this container was killed for memory. /dev/shm pages count against the same limit,
so a DataLoader filling /dev/shm can push the job over it; a worker killed this way surfaces as
`DataLoader worker (pid N) exited unexpectedly`.
""",
    example="""\
```
WARNING ENV007 the memory cgroup has recorded 2 OOM kills
```
""",
    fix="""\
Raise the memory limit (by the size of /dev/shm when known), or lower batch size, workers or
prefetch factor.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV007",
    name="oom-kills-recorded",
    summary="the memory cgroup has recorded OOM kills",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("host",),
    why=(
        "Something in this container was killed for memory; /dev/shm pages count against the "
        "same limit, so a DataLoader filling /dev/shm can push the job over it."
    ),
    doc=DOC,
    check=check,
)

"""ENV007 oom-kills-recorded: the memory cgroup has already OOM-killed something.

``memory.events`` ``oom_kill`` (v2) or ``memory.oom_control`` ``oom_kill`` (v1) counts kills
in this cgroup. shm pages are charged there, so a full /dev/shm plus the job's RSS is a usual
cause; a DataLoader worker killed this way shows as "exited unexpectedly".
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.doctor._base import DoctorOptions, Rule, memory_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Fix, Location, Severity

CODE = "ENV007"
NAME = "oom-kills-recorded"
SUMMARY = "the memory cgroup has recorded OOM kills"
SEVERITY = Severity.WARNING
WHY = (
    "Something in this container was killed for memory; /dev/shm pages count against the "
    "same limit, so a DataLoader filling /dev/shm can push the job over it."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
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
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        f"the memory cgroup has recorded {kills} OOM kill{'s' if kills != 1 else ''}",
        WHY,
        Location(file=facts.cgroup.memory_dir.value),
        fix,
    )


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

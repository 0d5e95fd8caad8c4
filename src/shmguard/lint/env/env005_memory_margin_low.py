"""ENV005 memory-margin-low: the memory limit minus /dev/shm leaves under 1 GiB (seed 6.2).

With /dev/shm full, the process, its workers and everything else in the cgroup share what is
left of the limit. Typical of a Kubernetes memory emptyDir without ``sizeLimit``, which the
kubelet sizes to the pod memory limit (config_formats.md 4.2).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.env._base import HOST_FIX_SAFETY, DoctorOptions, memory_fix
from shmguard.model import Location, Severity
from shmguard.model.host import HostFacts
from shmguard.units import format_iec


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag a tmpfs /dev/shm with 0 <= limit - total < ``options.memory_margin``."""
    total, limit = facts.shm.total.value, facts.cgroup.memory_limit.value
    if facts.shm.fstype.value != "tmpfs" or total is None or limit is None or total > limit:
        return
    left = limit - total
    if left >= options.memory_margin:
        return
    yield Violation(
        f"the memory limit ({format_iec(limit)}) leaves {format_iec(left)} beside a full "
        f"/dev/shm ({format_iec(total)}); less than {format_iec(options.memory_margin)}",
        Location(file=facts.cgroup.memory_dir.value),
        memory_fix(facts, limit, total, options),
    )


DOC = RuleDoc(
    what="""\
A tmpfs /dev/shm that fits under the memory limit but leaves less than 1 GiB beside it
(`limit - total < 1 GiB`).
""",
    why="""\
When /dev/shm fills, the model, the workers and the Python heaps must fit in what is left of the
limit, or the cgroup OOM-kills the job. This is what a Kubernetes memory emptyDir without
`sizeLimit` gives: the kubelet sizes the tmpfs to the pod's memory limit, leaving no margin.
""",
    example="""\
```
WARNING ENV005 the memory limit (16 GiB) leaves 0 B beside a full /dev/shm (16 GiB); less than 1 GiB
```
""",
    fix="""\
Raise the memory limit by the size of /dev/shm, or set `sizeLimit` (or `--shm-size`) to what the
job needs.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV005",
    name="memory-margin-low",
    summary="the memory limit leaves less than 1 GiB beside a full /dev/shm",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "shm pages count against the memory limit; when /dev/shm fills, the model, the workers "
        "and the Python heaps must fit in what is left, or the cgroup OOM-kills the job."
    ),
    doc=DOC,
    check=check,
)

"""ENV003 shm-usage-high: /dev/shm is at or over 80 % full (seed section 5.2).

A DataLoader's shm peaks at (num_workers * prefetch_factor + 1 or 2) batches
(torch_shm.md section 3); a /dev/shm that is already mostly used leaves no room for the next
batch. Files that are still held but unlinked count, and are listed under holders.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.env._base import (
    HOST_FIX_SAFETY,
    SHM_LOCATION,
    DoctorOptions,
    needed_size,
    shm_fix,
)
from shmguard.model import Severity
from shmguard.model.host import HostFacts
from shmguard.units import format_iec


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag used / total >= ``options.usage_threshold`` on a tmpfs /dev/shm."""
    used, total = facts.shm.used.value, facts.shm.total.value
    if used is None or not total or used < options.usage_threshold * total:
        return
    if facts.shm.fstype.value != "tmpfs":
        return  # a disk's or unknown filesystem's figures are not /dev/shm's (ENV009's case)
    held = facts.holders.value
    holders = ""
    if held is not None and held.processes:
        top = max(held.processes, key=lambda p: p.bytes)
        holders = f"; largest holder: pid {top.pid} ({top.name}) with {format_iec(top.bytes)}"
    yield Violation(
        f"/dev/shm is {100 * used // total}% full: {format_iec(used)} of {format_iec(total)}"
        + holders,
        SHM_LOCATION,
        shm_fix(
            facts,
            needed_size(facts, options, too_small=total)[0],
            "If a live job holds it, give /dev/shm more room:",
            options,
        ),
    )


DOC = RuleDoc(
    what="""\
A tmpfs /dev/shm at or over 80% full (`used / total >= 0.8`). The message
names the largest holder found by the holders scan. Not raised for a /dev/shm on a disk
directory: its statvfs figures are the whole disk's (ENV009 covers that case).
""",
    why="""\
A DataLoader's /dev/shm use peaks at `num_workers * prefetch_factor + 1` or `+ 2` batches
([background](background.md#how-much-is-needed)); a /dev/shm already mostly used has no room for
the next batch.""",
    example="""\
```
WARNING ENV003 /dev/shm is 95% full: ~1.9 GiB of 2 GiB
```
""",
    fix="""\
If a live job holds it, give /dev/shm more room (the fix shows twice the current size, at least
the policy's default 1 GiB); if the holders list shows nothing alive, look for leftovers (ENV011)
and stale named files.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV003",
    name="shm-usage-high",
    summary="/dev/shm is at or over 80% full",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "A DataLoader holds (num_workers x prefetch_factor + 1 or 2) batches in /dev/shm at its "
        "peak; with little room left the next batch fails with 'unable to allocate shared "
        "memory(shm)', a bus error, or a hang."
    ),
    doc=DOC,
    check=check,
)

"""ENV011 leftover-torch-files: zero-block ``torch_*`` files sit in /dev/shm.

When ``at::MapAllocator`` fails to allocate (ENOSPC) it raises before it unlinks, leaving a
named file with ``st_size`` = the request and no blocks, plus a leaked fd; with the default
``file_descriptor`` strategy nothing ever removes the name (torch_shm.md 1.2). They are the
trace of a job that ran out of /dev/shm here.

Variant ``stalled-job`` (an error): the same snapshot also shows /dev/shm near full, so by the one
stall verdict (:attr:`shmguard.triage.stall.ShmObservation.full`: free space below one
failed request or 2% of the size, with failed allocations) a DataLoader is most likely blocked
on it now: its main process waits forever for the batch whose allocation failed (torch_shm.md
section 2). A snapshot cannot see "no progress", so doctor says "likely"; ``shmguard watch``
confirms it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

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
from shmguard.triage.stall import ShmObservation
from shmguard.units import format_iec


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag any zero-block ``torch_*`` file."""
    files = facts.shm.leftovers.value
    if not files:
        return
    biggest = max(f.requested for f in files)
    size, lead = needed_size(facts, options, too_small=facts.shm.total.value)
    fix = shm_fix(facts, size, lead, options)
    cleanup = "Remove them when no job runs (rm /dev/shm/torch_*). "
    message = (
        f"{len(files)} zero-block torch_* file{'s' if len(files) != 1 else ''} in /dev/shm "
        f"(e.g. {files[0].name}; largest request {format_iec(biggest)}): failed allocations"
    )
    used, total = facts.shm.used.value, facts.shm.total.value
    full = (
        used is not None
        and bool(total)
        and facts.shm.fstype.value == "tmpfs"
        and ShmObservation(
            used=used, total=total or 0, peak=used, margin=biggest, failed_blocks=len(files)
        ).full
    )
    if full and used is not None and total:
        message = (
            f"likely stalled: DataLoader blocked on /dev/shm: {format_iec(used)} of "
            f"{format_iec(total)} used ({format_iec(max(total - used, 0))} free, less than "
            f"one failed request) and {message}"
        )
    yield Violation(
        message,
        SHM_LOCATION,
        replace(fix, description=cleanup + fix.description),
        variant="stalled-job" if full else None,
    )


DOC = RuleDoc(
    what="""\
Named `torch_*` files in /dev/shm with zero allocated blocks (`st_blocks == 0`, `st_size > 0`).
""",
    why="""\
When PyTorch's `MapAllocator` cannot allocate (ENOSPC) it raises before it unlinks, leaving a
named file whose size is the request and a leaked fd; with the default `file_descriptor`
strategy nothing removes the name later ([background](background.md#where-the-bytes-go)). They
are the trace of a job that ran out of /dev/shm here, and their sizes show what it asked for.""",
    example="""\
```
WARNING ENV011 1 zero-block torch_* file in /dev/shm (e.g. torch_77_123_0; largest request 18 MiB): failed allocations
ERROR ENV011 likely stalled: DataLoader blocked on /dev/shm: ~48.08 MiB of 64 MiB used (~15.92 MiB free, less than one failed request) and 7 zero-block torch_* files in /dev/shm (e.g. torch_6_1379982157_1; largest request 24 MiB): failed allocations
```

The second form (variant `stalled-job`, an error by default) is reported when the same snapshot
shows /dev/shm near full: free space below the largest failed request or 2% of the size, the
stall verdict's "full". A DataLoader whose worker failed to allocate then waits forever for the
lost batch; a snapshot cannot see that nothing progresses, so it says "likely";
[`shmguard watch`](watch.md) confirms it.
""",  # noqa: E501
    fix="""\
Remove them when no job runs (`rm /dev/shm/torch_*`), then size /dev/shm for the job.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV011",
    name="leftover-torch-files",
    summary="zero-block torch_* files in /dev/shm: traces of failed shm allocations",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "A PyTorch job here asked for shared memory and did not get it ('unable to allocate "
        "shared memory(shm)'); the empty files it left show how much each request was."
    ),
    doc=DOC,
    check=check,
    variants={"stalled-job": Severity.ERROR},
)

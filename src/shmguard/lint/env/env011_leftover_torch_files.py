"""ENV011 leftover-torch-files: zero-block ``torch_*`` files sit in /dev/shm.

When ``at::MapAllocator`` fails to allocate (ENOSPC) it raises before it unlinks, leaving a
named file with ``st_size`` = the request and no blocks, plus a leaked fd; with the default
``file_descriptor`` strategy nothing ever removes the name (torch_shm.md 1.2). They are the
trace of a job that ran out of /dev/shm here.
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
from shmguard.units import format_iec

CODE = "ENV011"
NAME = "leftover-torch-files"
SUMMARY = "zero-block torch_* files in /dev/shm: traces of failed shm allocations"
SEVERITY = Severity.WARNING
WHY = (
    "A PyTorch job here asked for shared memory and did not get it ('unable to allocate "
    "shared memory(shm)'); the empty files it left show how much each request was."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag any zero-block ``torch_*`` file."""
    files = facts.shm.leftovers.value
    if not files:
        return
    biggest = max(f.requested for f in files)
    size, lead = needed_size(facts, options, too_small=facts.shm.total.value)
    fix = shm_fix(facts, size, lead, options)
    cleanup = "Remove them when no job runs (rm /dev/shm/torch_*). "
    yield Violation(
        f"{len(files)} zero-block torch_* file{'s' if len(files) != 1 else ''} in /dev/shm "
        f"(e.g. {files[0].name}; largest request {format_iec(biggest)}): failed allocations",
        SHM_LOCATION,
        replace(fix, description=cleanup + fix.description),
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
```
""",  # noqa: E501
    fix="""\
Remove them when no job runs (`rm /dev/shm/torch_*`), then size /dev/shm for the job.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, FixAvailability.ALWAYS, ("host",), WHY, DOC, check)

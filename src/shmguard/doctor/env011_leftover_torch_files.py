"""ENV011 leftover-torch-files: zero-block ``torch_*`` files sit in /dev/shm.

When ``at::MapAllocator`` fails to allocate (ENOSPC) it raises before it unlinks, leaving a
named file with ``st_size`` = the request and no blocks, plus a leaked fd; with the default
``file_descriptor`` strategy nothing ever removes the name (torch_shm.md 1.2). They are the
trace of a job that ran out of /dev/shm here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Severity
from shmguard.units import format_iec

CODE = "ENV011"
NAME = "leftover-torch-files"
SUMMARY = "zero-block torch_* files in /dev/shm: traces of failed shm allocations"
SEVERITY = Severity.WARNING
WHY = (
    "A PyTorch job here asked for shared memory and did not get it ('unable to allocate "
    "shared memory(shm)'); the empty files it left show how much each request was."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
    """Flag any zero-block ``torch_*`` file."""
    files = facts.shm.leftovers.value
    if not files:
        return
    biggest = max(f.requested for f in files)
    size, lead = needed_size(facts, options, too_small=facts.shm.total.value)
    fix = shm_fix(facts, size, lead, options)
    cleanup = "Remove them when no job runs (rm /dev/shm/torch_*). "
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        f"{len(files)} zero-block torch_* file{'s' if len(files) != 1 else ''} in /dev/shm "
        f"(e.g. {files[0].name}; largest request {format_iec(biggest)}): failed allocations",
        WHY,
        SHM_LOCATION,
        replace(fix, description=cleanup + fix.description),
    )


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

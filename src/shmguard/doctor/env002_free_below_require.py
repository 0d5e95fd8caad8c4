"""ENV002 shm-free-below-require: less /dev/shm is free than ``--require`` asks for.

The job was declared to need ``--require`` bytes of /dev/shm; statvfs ``f_bavail`` (which
counts files that were unlinked but are still held, torch_shm.md 1.2) says fewer are free. The
next allocation past the free space fails: ENOSPC, SIGBUS, or a DataLoader hang. Error.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Severity
from shmguard.units import format_iec

CODE = "ENV002"
NAME = "shm-free-below-require"
SUMMARY = "free /dev/shm is below the size given with --require"
SEVERITY = Severity.ERROR
WHY = (
    "An allocation that does not fit fails at once: torch raises 'unable to allocate shared "
    "memory(shm) ... No space left on device', or a worker dies of SIGBUS, or the DataLoader "
    "hangs when the failure happens in a feeder thread."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
    """Compare statvfs free bytes with ``options.require``."""
    free = facts.shm.free.value
    if options.require is None or free is None or free >= options.require:
        return
    size, lead = needed_size(facts, options)
    ram = facts.memory.total.value
    beyond_ram = (
        f"; that is more than this machine's {format_iec(ram)} of RAM, which every tmpfs page "
        "comes out of"
        if ram is not None and options.require > ram
        else ""
    )
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        f"/dev/shm has {format_iec(free)} free, below the {format_iec(options.require)} "
        f"required (--require){beyond_ram}",
        WHY,
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

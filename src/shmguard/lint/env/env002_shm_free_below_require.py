"""ENV002 shm-free-below-require: less /dev/shm is free than ``--require`` asks for.

The job was declared to need ``--require`` bytes of /dev/shm; statvfs ``f_bavail`` (which
counts files that were unlinked but are still held, torch_shm.md 1.2) says fewer are free. The
next allocation past the free space fails: ENOSPC, SIGBUS, or a DataLoader hang. Error.
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
    yield Violation(
        f"/dev/shm has {format_iec(free)} free, below the {format_iec(options.require)} "
        f"required (--require){beyond_ram}",
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )


DOC = RuleDoc(
    what="""\
Free /dev/shm (statvfs `f_bavail`, which counts unlinked files still held by processes) below
the size given with `--require SIZE`. Not raised when free space is unknown: ramfs and a tmpfs
with `size=0` keep no block count (statvfs answers 0), which is no limit, not "0 B free". When
the size asked for is more than the machine's RAM, the message says so: tmpfs pages come out of
RAM, so no /dev/shm setting can meet it.
""",
    why="""\
The job was declared to need that much; the allocation that does not fit fails at once:
`RuntimeError: unable to allocate shared memory(shm) for file </torch_...>: No space left on
device (28)`, a worker killed by SIGBUS, or a DataLoader that hangs because the failure happened
in a worker's queue feeder thread.
""",
    example="""\
```
$ shmguard doctor --require 1g      # inside a 64 MiB /dev/shm
ERROR   ENV002 shm-free-below-require
        /dev/shm has 64 MiB free, below the 1 GiB required (--require)
        fix: Give /dev/shm what it holds now plus --require, with 25% headroom: 1.5 GiB.
          docker run --shm-size=1536m IMAGE ...
```
Exit status 1.
""",
    fix="""\
Size /dev/shm to what is used now plus the requirement, with the sizing policy's headroom
(25%) and rounding; the fix prints it in the runtime's syntax. "Used now" is statvfs `used` on
a tmpfs, and the bytes of the files in /dev/shm on anything else (a disk's statvfs `used` is
the whole disk's).
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV002",
    name="shm-free-below-require",
    summary="free /dev/shm is below the size given with --require",
    severity=Severity.ERROR,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "An allocation that does not fit fails at once: torch raises 'unable to allocate shared "
        "memory(shm) ... No space left on device', or a worker dies of SIGBUS, or the DataLoader "
        "hangs when the failure happens in a feeder thread."
    ),
    doc=DOC,
    check=check,
)

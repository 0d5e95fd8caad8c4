"""ENV009 shm-not-tmpfs: /dev/shm is not a tmpfs.

A disk directory (a bind mount, Slurm job_container/tmpfs with a disk BasePath) makes every
batch a file write with page-cache writeback: slow (seed section 3.2). ramfs (Apptainer
``memory fs type = ramfs``) has no size limit at all and statvfs reports zeros. A plain
directory on the root filesystem means nothing was mounted.
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


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag a /dev/shm whose mount is not tmpfs."""
    shm = facts.shm
    fstype = shm.fstype.value
    if shm.exists.value is not True or fstype is None or fstype == "tmpfs":
        return
    where = shm.mount_point.value
    own = where == shm.real_path
    size, lead = needed_size(facts, options)
    yield Violation(
        f"/dev/shm is on {fstype} ({shm.source.value} "
        + ("mounted there)" if own else f"mounted at {where}: /dev/shm is a plain directory)"),
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )


DOC = RuleDoc(
    what="""\
/dev/shm on something other than tmpfs: a disk directory bind-mounted there (Slurm
job_container/tmpfs with a disk `BasePath`), ramfs (Apptainer `memory fs type = ramfs`), or a
plain directory on the root filesystem.
""",
    why="""\
On a disk every shared batch is written through the page cache, which is slow; ramfs has no size
limit at all and statvfs reports zeros, so nothing bounds or measures it.""",
    example="""\
```
WARNING ENV009 /dev/shm is on ext4 (/dev/nvme0n1p2 mounted there)
```
""",
    fix="""\
Mount a sized tmpfs at /dev/shm: the container runtime's shm option, or for Slurm ask for
job_container/tmpfs with a tmpfs `BasePath`.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV009",
    name="shm-not-tmpfs",
    summary="/dev/shm is not a tmpfs (a disk directory, ramfs, or no mount at all)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "On a disk every shared batch is written through the page cache, which is slow; ramfs "
        "has no size limit and cannot be measured; only a sized tmpfs is bounded and fast."
    ),
    doc=DOC,
    check=check,
)

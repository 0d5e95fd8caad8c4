"""ENV008 shm-missing: there is no /dev/shm.

``shm_open(3)``, POSIX semaphores and every PyTorch DataLoader worker need it. Docker's
``--ipc=none`` gives a container none (config_formats.md 1.2).
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
from shmguard.model import Fix, Severity
from shmguard.model.host import HostFacts


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag a /dev/shm directory known to be missing (not one that could not be looked at)."""
    if facts.shm.exists.value is not False:
        return
    size, lead = needed_size(facts, options)
    yield Violation(
        "/dev/shm does not exist (Docker --ipc=none, or a minimal /dev)",
        SHM_LOCATION,
        _with_ipc(
            shm_fix(
                facts, size, lead.replace("Give /dev/shm", "Mount a tmpfs /dev/shm of"), options
            )
        ),
    )


def _with_ipc(fix: Fix) -> Fix:
    """A shm size alone does not bring /dev/shm back under ``--ipc=none``: Docker and Podman
    mount it only for a ``private`` or ``shareable`` IPC mode (docker-run(1) ``--ipc``)."""
    note = " With --ipc=none there is no /dev/shm whatever the size: use --ipc=private."
    return replace(fix, description=fix.description + note)


DOC = RuleDoc(
    what="""\
No /dev/shm directory at all (Docker `--ipc=none`, a minimal /dev). Not raised when the
directory could not be looked at (`--pid` of a process whose `/proc/PID/root` is unreadable):
that is unknown, not missing.
""",
    why="""\
`shm_open(3)` fails: DataLoader workers, multiprocessing queues (POSIX semaphores) and NCCL's
shm transport all stop.
""",
    example="""\
```
ERROR   ENV008 /dev/shm does not exist (Docker --ipc=none, or a minimal /dev)
```
""",
    fix="""\
Run with a private IPC namespace and a sized /dev/shm: the fix prints the size in the runtime's
syntax and adds "With --ipc=none there is no /dev/shm whatever the size: use --ipc=private."
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV008",
    name="shm-missing",
    summary="/dev/shm does not exist",
    severity=Severity.ERROR,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "shm_open(3) fails without /dev/shm: DataLoader workers, multiprocessing queues "
        "(semaphores) and NCCL's shm transport all stop."
    ),
    doc=DOC,
    check=check,
)

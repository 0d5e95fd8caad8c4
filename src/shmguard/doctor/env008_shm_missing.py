"""ENV008 shm-missing: there is no /dev/shm.

``shm_open(3)``, POSIX semaphores and every PyTorch DataLoader worker need it. Docker's
``--ipc=none`` gives a container none (config_formats.md 1.2).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Fix, Severity

CODE = "ENV008"
NAME = "shm-missing"
SUMMARY = "/dev/shm does not exist"
SEVERITY = Severity.ERROR
WHY = (
    "shm_open(3) fails without /dev/shm: DataLoader workers, multiprocessing queues "
    "(semaphores) and NCCL's shm transport all stop."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
    """Flag a /dev/shm directory known to be missing (not one that could not be looked at)."""
    if facts.shm.exists.value is not False:
        return
    size, lead = needed_size(facts, options)
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        "/dev/shm does not exist (Docker --ipc=none, or a minimal /dev)",
        WHY,
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


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

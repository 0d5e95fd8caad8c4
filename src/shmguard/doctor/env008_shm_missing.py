"""ENV008 shm-missing: there is no /dev/shm.

``shm_open(3)``, POSIX semaphores and every PyTorch DataLoader worker need it. Docker's
``--ipc=none`` gives a container none (config_formats.md 1.2).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Severity

CODE = "ENV008"
NAME = "shm-missing"
SUMMARY = "/dev/shm does not exist"
SEVERITY = Severity.ERROR
WHY = (
    "shm_open(3) fails without /dev/shm: DataLoader workers, multiprocessing queues "
    "(semaphores) and NCCL's shm transport all stop."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
    """Flag a missing /dev/shm directory."""
    if facts.shm.exists:
        return
    size, lead = needed_size(facts, options)
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        "/dev/shm does not exist (Docker --ipc=none, or a minimal /dev)",
        WHY,
        SHM_LOCATION,
        shm_fix(facts, size, lead.replace("Give /dev/shm", "Mount a tmpfs /dev/shm of")),
    )


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

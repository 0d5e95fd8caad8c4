"""ENV001 runtime-default-shm-size: /dev/shm is exactly a container runtime's default size.

Docker, containerd and CRI-O give 64 MiB (67,108,864 bytes), Podman 65,536,000 bytes
(config_formats.md 1.1, 4.1, 5). A float32 batch of 32 images of 3x224x224 is 18.4 MiB, so
64 MiB holds three: any DataLoader with num_workers * prefetch_factor >= 3 of them crashes with
"unable to allocate shared memory(shm)", a bus error, or hangs (torch_shm.md section 2). The
size may have been chosen on purpose, so this is a warning, not an error.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Severity
from shmguard.units import format_iec

CODE = "ENV001"
NAME = "runtime-default-shm-size"
SUMMARY = "/dev/shm is exactly a container runtime's default size (64 MiB; Podman 65,536,000 B)"
SEVERITY = Severity.WARNING
WHY = (
    "PyTorch DataLoader workers pass every batch through /dev/shm; 64 MiB holds three float32 "
    "batches of 32x3x224x224, so most image jobs with num_workers > 1 crash with 'unable to "
    "allocate shared memory(shm)' or a bus error, or hang."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
    """Flag /dev/shm whose statvfs total equals a runtime default."""
    runtimes = facts.shm.default_of.value
    total = facts.shm.total.value
    if not runtimes or total is None:
        return
    size, lead = needed_size(facts, options)
    yield Finding(
        CODE,
        NAME,
        SEVERITY,
        f"/dev/shm is {format_iec(total)} ({total} bytes): the size equals the default of "
        f"{', '.join(runtimes)}",
        WHY,
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

"""ENV001 runtime-default-shm-size: /dev/shm is exactly a container runtime's default size.

Docker, containerd and CRI-O give 64 MiB (67,108,864 bytes), Podman 65,536,000 bytes
(config_formats.md 1.1, 4.1, 5). A float32 batch of 32 images of 3x224x224 is 18.4 MiB, so
64 MiB holds three: any DataLoader with num_workers * prefetch_factor >= 3 of them crashes with
"unable to allocate shared memory(shm)", a bus error, or hangs (torch_shm.md section 2). The
size may have been chosen on purpose, so this is a warning, not an error.
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
    """Flag /dev/shm whose statvfs total equals a runtime default."""
    runtimes = facts.shm.default_of.value
    total = facts.shm.total.value
    if not runtimes or total is None:
        return
    size, lead = needed_size(facts, options)
    yield Violation(
        f"/dev/shm is {format_iec(total)} ({total} bytes): the size equals the default of "
        f"{', '.join(runtimes)}",
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )


DOC = RuleDoc(
    what="""\
/dev/shm whose statvfs size is exactly a container runtime's default: 64 MiB (67,108,864 bytes:
Docker `config.DefaultShmSize`, containerd CRI `defaultShmSize`, CRI-O `DefaultShmSize`) or
65,536,000 bytes (Podman's containers.conf `shm_size = "65536k"`, parsed as decimal). An equal
size is all it shows: someone may have chosen it, hence a warning and not an error.
""",
    why="""\
DataLoader workers pass every batch through /dev/shm. A float32 batch of 32 images of 3x224x224
is 18.4 MiB, so 64 MiB holds three: with `num_workers * prefetch_factor >= 3` the job crashes with
`unable to allocate shared memory(shm)`, dies of a bus error, or (about 5% of failing runs)
hangs forever ([background](background.md#what-failure-looks-like-torch-213)).
""",
    example="""\
```
$ docker run --rm IMAGE shmguard doctor --brief
WARNING ENV001 /dev/shm is 64 MiB (67108864 bytes): the size equals the default of docker, containerd, cri-o
```
""",  # noqa: E501
    fix="""\
Give the container the /dev/shm the job needs (measure it with `shmguard measure`; `--require`
sizes the fix): `docker run --shm-size=1g`, Compose `shm_size: "1g"`, a Kubernetes
`emptyDir: {medium: Memory, sizeLimit: 1Gi}` mounted at /dev/shm, ECS
`linuxParameters.sharedMemorySize: 1024`, `podman run --shm-size=1g`. When a memory limit is set,
the fix raises it by the growth of /dev/shm, since shm pages are charged to it.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV001",
    name="runtime-default-shm-size",
    summary="/dev/shm is exactly a container runtime's default size (64 MiB; Podman 65,536,000 B)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "PyTorch DataLoader workers pass every batch through /dev/shm; 64 MiB holds three float32 "
        "batches of 32x3x224x224, so most image jobs with num_workers > 1 crash with 'unable to "
        "allocate shared memory(shm)' or a bus error, or hang."
    ),
    doc=DOC,
    check=check,
)

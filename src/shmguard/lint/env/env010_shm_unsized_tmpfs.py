"""ENV010 shm-unsized-tmpfs: /dev/shm is a tmpfs without a size, or with ``size=0``.

Without ``size=`` the kernel allows half of RAM (tmpfs(5)); ``size=0`` means no limit. Typical
of ``docker run --ipc=host`` (the host's /dev/shm), Apptainer's default (the host's /dev),
enroot with ``ENROOT_UNSHARE_IPC`` and Kubernetes before 1.22 for an unsized memory emptyDir
(config_formats.md 1.2, 4.2, 6, 7). The job shares that space with the host, pages outlive it,
and one job can take half the node's memory. On a bare host this is normal: info there.
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
    """Flag sizing ``kernel-default`` or ``unlimited``."""
    sizing = facts.shm.sizing.value
    if sizing not in ("kernel-default", "unlimited"):
        return
    total = facts.shm.total.value
    what = (
        "with size=0: no limit"
        if sizing == "unlimited"
        else "without size=: the kernel default, half of RAM"
        + (f" ({format_iec(total)})" if total is not None else "")
    )
    size, lead = needed_size(facts, options)
    yield Violation(
        f"/dev/shm is a tmpfs mounted {what}",
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
        variant="bare-host" if facts.runtime.name == "none" else None,
    )


DOC = RuleDoc(
    what="""\
A tmpfs /dev/shm mounted without `size=` (the kernel default: half of RAM) or with `size=0`
(no limit). The kernel omits `size=` from mountinfo exactly when it equals the default.
""",
    why="""\
An unsized /dev/shm is usually the host's: `docker run --ipc=host`, Apptainer's default
(`mount dev = yes`), enroot with `ENROOT_UNSHARE_IPC`, Kubernetes before 1.22 for an unsized
memory emptyDir. It is shared with other jobs, files outlive the job, and one job can take half
of the node's memory.
""",
    example="""\
```
WARNING ENV010 /dev/shm is a tmpfs mounted without size=: the kernel default, half of RAM (~31.39 GiB)
```
""",  # noqa: E501
    fix="""\
Give the job a private, sized /dev/shm (`--ipc=private --shm-size=...`, a dshm emptyDir with
`sizeLimit`); on a bare host, `mount -o remount,size=<N>m /dev/shm` as root. Under Docker or
Podman the fix says that `--shm-size` has no effect with `--ipc=host` (the container then
bind-mounts the host's /dev/shm), so `--ipc=private` must come with it.
""",
    fix_safety=HOST_FIX_SAFETY,
)

RULE = Rule(
    code="ENV010",
    name="shm-unsized-tmpfs",
    summary="/dev/shm is a tmpfs without size= (half of RAM) or with size=0 (no limit)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "An unsized /dev/shm is usually the host's (--ipc=host, Apptainer): shared with other "
        "jobs, not freed when the job ends, and able to take half the node's memory."
    ),
    doc=DOC,
    check=check,
    variants={"bare-host": Severity.INFO},
)

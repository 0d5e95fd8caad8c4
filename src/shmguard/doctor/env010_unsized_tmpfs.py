"""ENV010 shm-unsized-tmpfs: /dev/shm is a tmpfs without a size, or with ``size=0``.

Without ``size=`` the kernel allows half of RAM (tmpfs(5)); ``size=0`` means no limit. Typical
of ``docker run --ipc=host`` (the host's /dev/shm), Apptainer's default (the host's /dev),
enroot with ``ENROOT_UNSHARE_IPC`` and Kubernetes before 1.22 for an unsized memory emptyDir
(config_formats.md 1.2, 4.2, 6, 7). The job shares that space with the host, pages outlive it,
and one job can take half the node's memory. On a bare host this is normal: info there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from shmguard.doctor._base import SHM_LOCATION, DoctorOptions, Rule, needed_size, shm_fix
from shmguard.inspect.host import HostFacts
from shmguard.model import Finding, Severity
from shmguard.units import format_iec

CODE = "ENV010"
NAME = "shm-unsized-tmpfs"
SUMMARY = "/dev/shm is a tmpfs without size= (half of RAM) or with size=0 (no limit)"
SEVERITY = Severity.WARNING
WHY = (
    "An unsized /dev/shm is usually the host's (--ipc=host, Apptainer): shared with other "
    "jobs, not freed when the job ends, and able to take half the node's memory."
)


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Finding]:
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
    finding = Finding(
        CODE,
        NAME,
        SEVERITY,
        f"/dev/shm is a tmpfs mounted {what}",
        WHY,
        SHM_LOCATION,
        shm_fix(facts, size, lead, options),
    )
    yield replace(finding, severity=Severity.INFO) if facts.runtime.name == "none" else finding


RULE = Rule(CODE, NAME, SUMMARY, SEVERITY, True, check)

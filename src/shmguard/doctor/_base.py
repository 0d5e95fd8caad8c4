"""What every ENV rule shares: options, rule metadata and fix builders.

A rule is one module with metadata and a pure ``check(facts, options) -> Iterator[Finding]``
(no I/O); :mod:`shmguard.doctor.registry` lists them. Fixes go through
:func:`shmguard.render.snippets.render_snippets`, the one snippet renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from shmguard.inspect.host import HostFacts
from shmguard.inspect.runtime import SNIPPET_RUNTIMES
from shmguard.model import Finding, Fix, Location, Severity
from shmguard.render.snippets import render_snippets
from shmguard.units import GiB, MiB, format_iec, round_up

SHM_LOCATION = Location(file="/dev/shm")

#: ``ShmFacts.sizing`` values of a tmpfs nobody sized: usually the host's /dev/shm.
UNSIZED = ("kernel-default", "unlimited")

#: With ``--ipc=host`` the container bind-mounts the host's /dev/shm and ``--shm-size`` is not
#: used (moby ``daemon/container_operations_unix.go`` ``setupIpcDirs``: only a private or
#: shareable IPC mode mounts a tmpfs of ``ShmSize``; Podman likewise, podman-run(1) ``--ipc``).
IPC_HOST_NOTE = (
    " An unsized /dev/shm is usually the host's (--ipc=host), where --shm-size has no effect:"
    " run with --ipc=private (the default) for the size to apply."
)


@dataclass(frozen=True)
class DoctorOptions:
    """Thresholds of the ENV rules.

    Attributes:
        require: bytes of free /dev/shm the job needs (``--require``), or None.
        usage_threshold: fraction of /dev/shm in use that is "nearly full" (0.8: seed 5.2).
        memory_margin: bytes the memory limit must leave beside a full /dev/shm (1 GiB: seed
            6.2).
        min_nofile: soft open-file limit below which many workers run out of fds.
        example_size: the size shown in a fix when nothing says what the job needs.
    """

    require: int | None = None
    usage_threshold: float = 0.8
    memory_margin: int = GiB
    min_nofile: int = 4096
    example_size: int = GiB


Check = Callable[[HostFacts, DoctorOptions], Iterator[Finding]]


@dataclass(frozen=True)
class Rule:
    """One ENV rule: stable ``code``, kebab-case ``name``, one-line ``summary``, default
    ``severity``, whether findings carry config ``snippets`` (``fixable``), and ``check``."""

    code: str
    name: str
    summary: str
    severity: Severity
    fixable: bool
    check: Check


def memory_for(facts: HostFacts, shm_size: int) -> int | None:
    """The memory limit to print next to ``shm_size``: the current limit raised by the growth
    of /dev/shm (tmpfs pages are charged to the memory cgroup, config_formats.md 1.3), rounded
    up to GiB; None when there is no limit or it is unknown."""
    limit = facts.cgroup.memory_limit.value
    if limit is None:
        return None
    current = facts.shm.total.value or 0
    if shm_size <= current and limit - shm_size >= GiB:
        return limit
    return round_up(limit + max(shm_size - current, 0), GiB)


def shm_fix(facts: HostFacts, shm_size: int, lead: str) -> Fix:
    """A fix giving /dev/shm ``shm_size`` bytes in the detected runtime's syntax.

    ``lead`` is the sentence before the snippets. Runtimes without a shm setting (Apptainer,
    Slurm, a bare host) get a sentence saying where the size comes from instead.
    """
    runtime = facts.runtime.name
    memory = memory_for(facts, shm_size)
    text = f"{lead} {format_iec(shm_size)}"
    if memory is not None and memory != facts.cgroup.memory_limit.value:
        text += f", and raise the memory limit to {format_iec(memory)} (shm pages count against it)"
    text += "."
    extra = {
        "apptainer": " Apptainer shares the host's /dev/shm (mount dev = yes): ask the admin "
        "to size it, or use --contain for a private tmpfs bounded by the cgroup memory limit.",
        "slurm": " Slurm has no /dev/shm setting: it is the node's (or job_container/tmpfs's "
        "BasePath); ask the admin, or run the job in a container with the size below.",
        "none": f" On a host: mount -o remount,size={shm_size // MiB}m /dev/shm (as root).",
    }.get(runtime, "")
    if facts.shm.sizing.value in UNSIZED and runtime in ("docker", "podman"):
        extra += IPC_HOST_NOTE
    snippets = render_snippets(shm_size, memory, SNIPPET_RUNTIMES.get(runtime))
    return Fix(text + extra, snippets)


def memory_fix(facts: HostFacts, limit: int, shm_total: int) -> Fix:
    """Raise the memory limit by the size of /dev/shm (keeping /dev/shm as it is)."""
    memory = round_up(limit + shm_total, GiB)
    runtimes = SNIPPET_RUNTIMES.get(facts.runtime.name)
    return Fix(
        f"Raise the memory limit to {format_iec(memory)} (the current limit plus /dev/shm), "
        "or make /dev/shm smaller.",
        render_snippets(shm_total, memory, runtimes),
    )


def needed_size(facts: HostFacts, options: DoctorOptions) -> tuple[int, str]:
    """The /dev/shm size a fix should show, and the sentence that introduces it: what is used
    now plus ``--require`` when given (statvfs ``used`` on a tmpfs; the named files' bytes on
    anything else, whose statvfs figures are the whole disk's), else the example size with a
    pointer to measuring."""
    if options.require is not None:
        # statvfs "used" is /dev/shm's own only on a tmpfs mounted there; on a disk directory
        # it is the whole disk's, so count the files in /dev/shm instead.
        shm = facts.shm
        used = shm.used.value if shm.fstype.value == "tmpfs" else shm.named_bytes.value
        return round_up((used or 0) + options.require, MiB), "Give /dev/shm at least"
    return (
        options.example_size,
        "Size /dev/shm from a measurement (shmguard measure); for example",
    )

"""What every ENV rule shares: options and fix builders.

A rule is one module with metadata (:class:`~shmguard.lint.engine.Rule`) and a pure
``check(facts, options) -> Iterator[Violation]`` (no I/O); :data:`shmguard.lint.env.RULES`
lists them and :func:`shmguard.lint.engine.run_rules` runs them. Fixes are values
(:class:`~shmguard.model.fix.Change`) sized by the one sizing policy
(:mod:`shmguard.estimate.policy`); the renderers write them in each runtime's syntax.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shmguard.estimate.decide import Need, RanShort, ShmEvidence, choose_shm
from shmguard.estimate.policy import Policy, memory_limit_for
from shmguard.model import Fix, Location, shm_changes
from shmguard.model.fix import FIX_RUNTIMES, PLATFORM_NOTES
from shmguard.model.host import HostFacts
from shmguard.units import MiB, format_iec

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
        min_nofile: soft open-file limit below which many workers run out of fds.
        policy: the sizing policy: headroom, the memory margin a limit must leave beside a
            full /dev/shm (1 GiB: seed 6.2) and the size shown when nothing says what the job
            needs.
    """

    require: int | None = None
    usage_threshold: float = 0.8
    min_nofile: int = 4096
    policy: Policy = field(default_factory=Policy)

    @property
    def memory_margin(self) -> int:
        """Bytes the memory limit must leave beside a full /dev/shm (the policy's)."""
        return self.policy.memory_margin


#: Fix safety of every fix that sizes /dev/shm or the memory limit (rule docs).
HOST_FIX_SAFETY = (
    "Display-only: doctor changes nothing on the host. The printed /dev/shm size comes from "
    "the one sizing policy (a stated need plus headroom, else the default 1 GiB, at least twice "
    "a /dev/shm that ran short) and is a starting point until measured with `shmguard measure`. "
    "Where a memory limit is set, the printed limit grows with /dev/shm, since shm pages are "
    "charged to it: applying the fix reserves more memory for the container."
)


def memory_for(facts: HostFacts, shm_size: int, options: DoctorOptions) -> int | None:
    """The memory limit to print next to ``shm_size``: the sizing policy's
    :func:`~shmguard.estimate.policy.memory_limit_for` of the current limit and /dev/shm (tmpfs
    pages are charged to the memory cgroup, config_formats.md 1.3); None when there is no
    limit or it is unknown."""
    return memory_limit_for(
        shm_size,
        options.policy,
        current_limit=facts.cgroup.memory_limit.value,
        current_shm=facts.shm.total.value or 0,
    )


def _runtimes(facts: HostFacts) -> tuple[str, ...]:
    return FIX_RUNTIMES.get(facts.runtime.name, ())


def shm_fix(facts: HostFacts, shm_size: int, lead: str, options: DoctorOptions) -> Fix:
    """A fix giving /dev/shm ``shm_size`` bytes, for the detected runtime.

    ``lead`` is the sentence before the size. Runtimes without a shm setting (Apptainer,
    Slurm, a bare host) get a sentence saying where the size comes from instead.
    """
    runtime = facts.runtime.name
    memory = memory_for(facts, shm_size, options)
    text = f"{lead} {format_iec(shm_size)}"
    if memory is not None and memory != facts.cgroup.memory_limit.value:
        text += f", and raise the memory limit to {format_iec(memory)} (shm pages count against it)"
    text += "."
    if runtime in PLATFORM_NOTES:
        extra = " " + PLATFORM_NOTES[runtime]
    elif runtime == "none":
        extra = f" On a host: mount -o remount,size={shm_size // MiB}m /dev/shm (as root)."
    else:
        extra = ""
    if facts.shm.sizing.value in UNSIZED and runtime in ("docker", "podman"):
        extra += IPC_HOST_NOTE
    return Fix(
        f"Give /dev/shm {format_iec(shm_size)}",
        text + extra,
        shm_changes(shm_size, memory, _runtimes(facts)),
    )


def memory_fix(facts: HostFacts, limit: int, shm_total: int, options: DoctorOptions) -> Fix:
    """Raise the memory limit by the size of /dev/shm (keeping /dev/shm as it is)."""
    memory = memory_limit_for(shm_total, options.policy, current_limit=limit) or limit
    return Fix(
        f"Raise the memory limit to {format_iec(memory)}",
        f"Raise the memory limit to {format_iec(memory)} (the current limit plus /dev/shm), "
        "or make /dev/shm smaller.",
        shm_changes(shm_total, memory, _runtimes(facts)),
    )


def needed_size(
    facts: HostFacts, options: DoctorOptions, *, too_small: int | None = None
) -> tuple[int, str]:
    """The /dev/shm size a fix should show, and the sentence that introduces it, from the one
    size decision (:func:`~shmguard.estimate.decide.choose_shm`): what is used now plus
    ``--require`` when given (statvfs ``used`` on a tmpfs; the named files' bytes on anything
    else, whose statvfs figures are the whole disk's) as a need, else the policy's default size
    (at least twice ``too_small``, a /dev/shm size known to have run short; else capped by the
    memory limit), with a pointer to measuring."""
    if options.require is not None:
        # statvfs "used" is /dev/shm's own only on a tmpfs mounted there; on a disk directory
        # it is the whole disk's, so count the files in /dev/shm instead.
        shm = facts.shm
        used = shm.used.value if shm.fstype.value == "tmpfs" else shm.named_bytes.value
        need = Need((used or 0) + options.require, "need")
        sized = choose_shm(ShmEvidence(measured=need), options.policy)
        return sized.bytes, (
            f"Give /dev/shm what it holds now plus --require, with "
            f"{options.policy.headroom:.0%} headroom:"
        )
    evidence = ShmEvidence(
        ran_short=None if too_small is None else RanShort(too_small),
        memory_limit=facts.cgroup.memory_limit.value,
        current=facts.shm.total.value,
    )
    return (
        choose_shm(evidence, options.policy).bytes,
        "Size /dev/shm from a measurement (shmguard measure); for example",
    )

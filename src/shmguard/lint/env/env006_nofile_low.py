"""ENV006 nofile-low: the soft open-file limit is low for DataLoader workers.

With the default ``file_descriptor`` sharing strategy the main process keeps one fd per shared
tensor in flight (torch_shm.md 1.1: "one fd per storage"), about num_workers x prefetch_factor
x tensors per batch, plus the workers' own. Past ``RLIMIT_NOFILE`` torch fails with "Too many
open files" or "received 0 items of ancdata".
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.env._base import DoctorOptions
from shmguard.model import Fix, Location, Severity
from shmguard.model.host import HostFacts


def check(facts: HostFacts, options: DoctorOptions) -> Iterator[Violation]:
    """Flag a soft nofile limit below ``options.min_nofile``."""
    soft, hard = facts.limits.nofile_soft.value, facts.limits.nofile_hard.value
    if soft is None or soft >= options.min_nofile:
        return
    hard_text = "unlimited" if hard is None and facts.limits.nofile_hard.ok else str(hard)
    raise_to = options.min_nofile * 16
    steps = []
    if hard is None or hard > soft:
        steps.append(f"ulimit -n {hard if hard is not None else raise_to} in the job's shell")
    steps += _runtime_steps(facts.runtime.name, raise_to)
    steps.append("or torch.multiprocessing.set_sharing_strategy('file_system')")
    yield Violation(
        f"the open-file limit is {soft} (soft) / {hard_text} (hard); below {options.min_nofile}",
        Location(file="/proc/self/limits" if facts.pid is None else f"/proc/{facts.pid}/limits"),
        Fix("Raise the open-file limit", "Raise it: " + "; ".join(steps) + "."),
    )


def _runtime_steps(runtime: str, n: int) -> list[str]:
    """How the detected runtime sets RLIMIT_NOFILE: ``--ulimit`` (docker-run(1),
    podman-run(1)), Compose ``ulimits:``; Kubernetes has no pod field for it (the container
    runtime's own limit applies, e.g. containerd's ``LimitNOFILE``)."""
    docker = f"docker run --ulimit nofile={n}:{n} (Compose: ulimits: nofile: {n})"
    podman = f"podman run --ulimit nofile={n}:{n}"
    return {
        "docker": [docker],
        "podman": [podman],
        "kubernetes": [
            "Kubernetes has no pod setting for it: the node's container runtime sets it "
            "(containerd: LimitNOFILE in its systemd unit); ask the cluster admin"
        ],
        "slurm": ["Slurm propagates the submitting shell's limit: ulimit -n before sbatch"],
    }.get(runtime, [docker, podman])


DOC = RuleDoc(
    what="""\
A soft open-file limit (`Max open files` in /proc/PID/limits) below 4096.
""",
    why="""\
With PyTorch's default `file_descriptor` sharing strategy the main process keeps one fd per
shared tensor in flight (about workers x prefetch factor x tensors per batch), plus the
workers'. Past the limit torch fails with `Too many open files` or `received 0 items of ancdata`.
""",
    example="""\
```
WARNING ENV006 the open-file limit is 1024 (soft) / 1024 (hard); below 4096
```
""",
    fix="""\
`ulimit -n <hard>` when the hard limit is higher; then, for the detected runtime: Docker
`docker run --ulimit nofile=65536:65536` (Compose `ulimits: nofile: 65536`); Podman `podman run
--ulimit nofile=65536:65536`; Kubernetes has no pod field for it (the node's container runtime
sets it, e.g. containerd's `LimitNOFILE`: ask the cluster admin); Slurm propagates the
submitting shell's limit (`ulimit -n` before `sbatch`); anything else gets the Docker and Podman
forms. Or `torch.multiprocessing.set_sharing_strategy('file_system')`.
""",
    fix_safety="""\
Display-only: doctor changes nothing on the host. Raising the open-file limit changes nothing
else; the `file_system` sharing strategy it also names leaves named files in /dev/shm when a
job is killed, so clean them up (ENV011 finds them).""",
)

RULE = Rule(
    code="ENV006",
    name="nofile-low",
    summary="the soft open-file limit (nofile) is low for many DataLoader workers",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("host",),
    why=(
        "torch's default file_descriptor strategy keeps one fd per shared tensor in flight; with "
        "many workers and tensors per batch the process runs out of descriptors ('Too many open "
        "files', 'received 0 items of ancdata')."
    ),
    doc=DOC,
    check=check,
)

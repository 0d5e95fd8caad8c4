"""The fix model: a fix is a value (which setting, for which runtime, to what size), not text.

The snippet renderer (:mod:`shmguard.fix.snippets`), ``check --fix`` and the admission
webhook all start from these values; each writes them in its runtime's own syntax
(:mod:`shmguard.units`). Nothing here knows a renderer, a rule or a host.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: Runtimes a fix can be written for, in the order they are shown. Their syntaxes:
#: Docker and Podman ``--shm-size`` / ``--memory`` (go-units, binary); Compose ``shm_size`` /
#: ``mem_limit`` (the same strings); Kubernetes ``emptyDir {medium: Memory, sizeLimit}`` mounted
#: at /dev/shm and ``resources.limits.memory`` (quantities: ``2Gi``; ``2G`` is decimal); ECS
#: ``linuxParameters.sharedMemorySize`` and container ``memory`` (integer MiB). Sources:
#: docs/background.md, "What each runtime does".
RUNTIMES = ("docker", "compose", "kubernetes", "podman", "ecs")


#: The runtimes whose fixes fit a detected runtime (``RuntimeFacts.name``): a Docker container
#: may equally be run by ``docker run``, Compose or ECS; a runtime not listed gets all of them.
FIX_RUNTIMES: dict[str, tuple[str, ...]] = {
    "kubernetes": ("kubernetes",),
    "podman": ("podman",),
    "docker": ("docker", "compose", "ecs"),
}


#: Where a job can run that has no /dev/shm setting of its own for a snippet: a scheduler
#: (Slurm), a container runtime without --shm-size (Apptainer) and managed platforms. A fix
#: for one of them is a sentence (:data:`PLATFORM_NOTES`), not a :class:`Change`.
PLATFORMS = ("slurm", "apptainer", "sagemaker", "azureml", "databricks", "colab")

#: What to do about /dev/shm on each platform, one sentence each. Sources: Slurm
#: slurm.schedmd.com/job_container_tmpfs.html (a per-job /dev/shm only with that plugin);
#: Apptainer binds the host's /dev unless --contain (apptainer/singularity #5921, ``mount dev``
#: in apptainer.conf); SageMaker training jobs take no shm size (aws/sagemaker-python-sdk
#: #5592); AzureML jobs default to 2 GiB and take ``shm_size`` in the job's resources
#: (Azure/MachineLearningNotebooks #560, MicrosoftDocs/azure-docs #107465); Colab's /dev/shm
#: cannot be resized from a notebook (googlecolab/colabtools #329, #1495). For Databricks no
#: setting is documented, so the sentence says what to check.
PLATFORM_NOTES: dict[str, str] = {
    "slurm": "Slurm has no /dev/shm setting: it is the node's (or job_container/tmpfs's "
    "BasePath); ask the admin, or run the job in a container with this size.",
    "apptainer": "Apptainer shares the host's /dev/shm (mount dev = yes): ask the admin to "
    "size it, or use --contain for a private tmpfs bounded by the cgroup memory limit.",
    "sagemaker": "SageMaker training jobs have no /dev/shm setting: keep fewer batches in "
    "flight (the application-side steps).",
    "azureml": "Set shm_size in the job's resources (YAML `resources: {shm_size: ...}`, SDK v2 "
    "`JobResourceConfiguration(shm_size=...)`) to this size; AzureML gives 2g when unset.",
    "databricks": "Databricks sets the cluster nodes' /dev/shm itself: check it with "
    "`%sh df -h /dev/shm` and keep fewer batches in flight (the application-side steps).",
    "colab": "Colab's /dev/shm cannot be resized from the notebook: keep fewer batches in "
    "flight (the application-side steps; num_workers=0 uses none).",
}


class Setting(str, enum.Enum):
    """A configuration setting a fix changes. Values are int bytes, except ``cpu-limit``.

    * ``shm-size``: the size of the container's /dev/shm (Docker/Podman ``--shm-size``,
      Compose ``shm_size``, Kubernetes ``emptyDir.sizeLimit`` of the memory-backed volume at
      /dev/shm, ECS ``sharedMemorySize``);
    * ``memory-limit``: the container's memory limit (tmpfs pages are charged to it:
      kernel Documentation/admin-guide/cgroup-v2.rst, "Memory Ownership");
    * ``shm-mount``: a memory-backed volume mounted at /dev/shm, of ``value`` bytes, where the
      runtime gives none by itself (a Kubernetes pod: no emptyDir, no /dev/shm sizing);
    * ``cpu-limit``: the container's CPU quota in **millicpus** (1500 = 1.5 CPUs): Docker and
      Podman ``--cpus``, Compose ``cpus``, Kubernetes ``resources.limits.cpu`` (``1500m``),
      ECS container ``cpu`` (1024 units per vCPU). What ``tune`` sized its workers for.
      Sources: docs.docker.com/engine/containers/resource_constraints (``--cpus``), the
      Compose specification (services.cpus), kubernetes.io "Resource units in Kubernetes"
      (CPU), AWS ECS task definition parameters (container ``cpu``).
    """

    SHM_SIZE = "shm-size"
    MEMORY_LIMIT = "memory-limit"
    SHM_MOUNT = "shm-mount"
    CPU_LIMIT = "cpu-limit"


@dataclass(frozen=True)
class Change:
    """Set ``setting`` to ``value`` (bytes; millicpus for ``cpu-limit``) on ``runtimes``
    (empty: every runtime of :data:`RUNTIMES`).

    Raises:
        ValueError: for a value <= 0 or an unknown runtime name.
    """

    setting: Setting
    value: int
    runtimes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "setting", Setting(self.setting))
        except ValueError:
            names = ", ".join(x.value for x in Setting)
            raise ValueError(f"unknown setting {self.setting!r}; expected one of {names}") from None
        unit = "millicpus" if self.setting is Setting.CPU_LIMIT else "bytes"
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"{self.setting.value} must be int {unit}, got {self.value!r}")
        if self.value <= 0:
            raise ValueError(f"{self.setting.value} must be > 0 {unit}, got {self.value}")
        if isinstance(self.runtimes, str):
            raise ValueError(f"runtimes must be a tuple of names, got the string {self.runtimes!r}")
        object.__setattr__(self, "runtimes", tuple(dict.fromkeys(self.runtimes)))
        unknown = [r for r in self.runtimes if r not in RUNTIMES]
        if unknown:
            raise ValueError(
                f"unknown runtime {unknown[0]!r}; expected one of {', '.join(RUNTIMES)}"
            )


def shm_changes(
    shm_size: int,
    memory_limit: int | None = None,
    runtimes: tuple[str, ...] = (),
    *,
    cpu_millis: int | None = None,
) -> tuple[Change, ...]:
    """The usual pair: /dev/shm of ``shm_size`` bytes and, when given, a memory limit of
    ``memory_limit`` bytes, both for ``runtimes`` (empty: all); ``cpu_millis`` adds a CPU
    limit (millicpus).

    Raises:
        ValueError: for a size <= 0 or an unknown runtime.
    """
    out = [Change(Setting.SHM_SIZE, shm_size, runtimes)]
    if memory_limit is not None:
        out.append(Change(Setting.MEMORY_LIMIT, memory_limit, runtimes))
    if cpu_millis is not None:
        out.append(Change(Setting.CPU_LIMIT, cpu_millis, runtimes))
    return tuple(out)

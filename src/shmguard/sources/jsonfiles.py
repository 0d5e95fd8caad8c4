"""ECS/Batch task definitions and Docker's daemon.json, read through the YAML node layer.

JSON is YAML 1.2 flow syntax and PyYAML reads it with exact positions (every string is a
double-quoted scalar, so a value's span includes its quotes; tests compare each value with
``json.loads`` and each span with the source). Fields:

* ECS task definition (AWS ``RegisterTaskDefinition`` API reference; config_formats.md §9):
  ``containerDefinitions[].linuxParameters.sharedMemorySize`` (integer MiB, not on Fargate),
  ``.linuxParameters.tmpfs[]`` (``containerPath``, ``size`` MiB), ``.memory`` (hard limit,
  MiB), ``.memoryReservation`` (MiB), task ``ipcMode`` (``host``/``task``/``none``),
  ``requiresCompatibilities``. Also accepted: the ``aws ecs describe-task-definition`` output
  (under ``taskDefinition``) and AWS Batch ``containerProperties``.
* daemon.json (dockerd ``daemon/config``): ``default-shm-size`` (must be a JSON *string*:
  ``MemBytes.UnmarshalJSON``), ``default-ipc-mode`` (``shareable`` or ``private``).
"""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.sources.k8s_model import EnvVar, dig, seq_maps, text
from shmguard.sources.yamlload import YamlFile
from shmguard.sources.yamlnode import YMap, YNode

#: Keys only a daemon.json has (any one identifies it), from dockerd's documented options.
DAEMON_KEYS = frozenset(
    [
        "default-shm-size",
        "default-ipc-mode",
        "default-runtime",
        "runtimes",
        "storage-driver",
        "log-driver",
        "log-opts",
        "data-root",
        "exec-opts",
        "registry-mirrors",
        "insecure-registries",
        "live-restore",
        "default-ulimits",
        "cgroup-parent",
        "default-address-pools",
        "features",
        "builder",
    ]
)


@dataclass(frozen=True)
class EcsContainer:
    """One ``containerDefinitions[]`` entry (or a Batch ``containerProperties``)."""

    node: YMap
    name: str | None
    image: YNode | None
    command: YNode | None
    shared_memory_size: YNode | None
    tmpfs: tuple[YMap, ...]
    memory: YNode | None
    memory_reservation: YNode | None
    gpu: YNode | None
    env: tuple[EnvVar, ...]


@dataclass(frozen=True)
class EcsTaskDefinition:
    """A task definition: task-level ``ipcMode``, ``memory``, ``requiresCompatibilities``
    nodes and its containers."""

    node: YMap
    ipc_mode: YNode | None
    memory: YNode | None
    compatibilities: YNode | None
    containers: tuple[EcsContainer, ...]


@dataclass(frozen=True)
class DaemonConfig:
    """daemon.json: the root and its ``default-shm-size`` / ``default-ipc-mode`` nodes."""

    node: YMap
    default_shm_size: YNode | None
    default_ipc_mode: YNode | None


def _container(c: YMap) -> EcsContainer:
    lp = c.get("linuxParameters")
    gpu = None
    for r in seq_maps(c.get("resourceRequirements")):
        if text(r.get("type")) == "GPU":
            gpu = r.get("value")
    return EcsContainer(
        node=c,
        name=text(c.get("name")),
        image=c.get("image"),
        command=c.get("command"),
        shared_memory_size=dig(lp, "sharedMemorySize"),
        tmpfs=tuple(seq_maps(dig(lp, "tmpfs"))),
        memory=c.get("memory"),
        memory_reservation=c.get("memoryReservation"),
        gpu=gpu,
        env=tuple(
            EnvVar(str(text(e.get("name"))), e.get("value"), e)
            for e in seq_maps(c.get("environment"))
            if text(e.get("name")) is not None
        ),
    )


def ecs_task_definition(root: YNode | None) -> EcsTaskDefinition | None:
    """The task definition in ``root`` (or its ``taskDefinition``), a Batch job definition
    (``containerProperties``), or None."""
    if not isinstance(root, YMap):
        return None
    td = root.get("taskDefinition")
    node = td if isinstance(td, YMap) and "containerDefinitions" in td else root
    if "containerDefinitions" in node:
        containers = tuple(_container(c) for c in seq_maps(node.get("containerDefinitions")))
    elif isinstance(node.get("containerProperties"), YMap):
        cp = node.get("containerProperties")
        assert isinstance(cp, YMap)
        containers = (_container(cp),)
    else:
        return None
    return EcsTaskDefinition(
        node,
        node.get("ipcMode"),
        node.get("memory"),
        node.get("requiresCompatibilities"),
        containers,
    )


def daemon_config(root: YNode | None) -> DaemonConfig | None:
    """daemon.json when ``root`` is a mapping whose keys include one of :data:`DAEMON_KEYS`."""
    if not isinstance(root, YMap) or not DAEMON_KEYS.intersection(root.keys()):
        return None
    return DaemonConfig(root, root.get("default-shm-size"), root.get("default-ipc-mode"))


def json_sources(yf: YamlFile) -> tuple[list[EcsTaskDefinition], list[DaemonConfig]]:
    """The task definitions and daemon configurations of a loaded JSON (or YAML) file."""
    ecs: list[EcsTaskDefinition] = []
    daemon: list[DaemonConfig] = []
    for d in yf.documents:
        if (t := ecs_task_definition(d.root)) is not None:
            ecs.append(t)
        elif (dc := daemon_config(d.root)) is not None:
            daemon.append(dc)
    return ecs, daemon

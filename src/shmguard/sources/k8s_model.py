"""Views of a Kubernetes PodSpec and its containers and volumes, with node positions.

Field names follow ``k8s.io/api/core/v1`` (``PodSpec``, ``Container``, ``Volume``,
``EmptyDirVolumeSource``, ``SecurityContext``); see ../shared/research/config_formats.md §4.
Every value is the YAML view of the field (:mod:`~shmguard.sources.yamlnode`), or None
when absent, so a rule reads both the value and where it is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq
from shmguard.units import SizeError, k8s_quantity_bytes

#: Extended resources that request an accelerator (device plugins' resource names).
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "intel.com/gpu")


def dig(node: YNode | None, *keys: str) -> YNode | None:
    """The node at ``keys`` under ``node`` (mappings only), or None when any step is missing."""
    for k in keys:
        if not isinstance(node, YMap):
            return None
        node = node.get(k)
    return node


def seq_maps(node: YNode | None) -> list[YMap]:
    """The mapping items of a sequence node (others skipped); [] when not a sequence."""
    return [x for x in node.items if isinstance(x, YMap)] if isinstance(node, YSeq) else []


def scalars(node: YNode | None) -> list[YScalar]:
    """The scalar items of a sequence node; [] when not a sequence."""
    return [x for x in node.items if isinstance(x, YScalar)] if isinstance(node, YSeq) else []


def text(node: YNode | None) -> str | None:
    """A scalar's string value, or None."""
    return node.value if isinstance(node, YScalar) else None


#: The path whose mount sizes shared memory.
DEV_SHM = "/dev/shm"


def is_dev_shm(path: str | None) -> bool:
    """True for ``/dev/shm`` (and ``/dev/shm/``)."""
    return path is not None and path.rstrip("/") == DEV_SHM


def quantity_bytes(node: YNode | None) -> int | None:
    """The bytes of a Kubernetes quantity scalar (``2Gi``), or None for no scalar, a
    placeholder or a value that is no quantity."""
    if not isinstance(node, YScalar) or node.placeholder:
        return None
    try:
        return k8s_quantity_bytes(node.value)
    except SizeError:
        return None


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: its name, the value node (None for ``valueFrom`` or a bare
    name) and the node of the whole entry."""

    name: str
    value: YNode | None
    node: YNode


@dataclass(frozen=True)
class VolumeMount:
    """``volumeMounts[]``: the volume ``name``, ``mountPath`` node, and the entry node."""

    name: str | None
    mount_path: YNode | None
    node: YMap


@dataclass(frozen=True)
class Container:
    """A container (or init container, or a CRD field shaped like one).

    Attributes:
        node: the container mapping; ``name`` its name (None when absent).
        image, command, args, resources: the field nodes (``resources`` is
            ``resourcesPerNode`` for a Kubeflow TrainJob trainer).
        memory_limit, memory_request: ``resources.limits.memory`` / ``requests.memory``.
        gpu: the first accelerator limit or request found (:data:`GPU_RESOURCES`).
        env: the ``env`` entries; volume_mounts: the ``volumeMounts`` entries.
        privileged: ``securityContext.privileged``; cap_add: ``securityContext.capabilities.add``.
        init: True for an init container.
    """

    node: YMap
    name: str | None
    image: YNode | None
    command: YNode | None
    args: YNode | None
    resources: YNode | None
    memory_limit: YNode | None
    memory_request: YNode | None
    gpu: YNode | None
    env: tuple[EnvVar, ...]
    volume_mounts: tuple[VolumeMount, ...]
    privileged: YNode | None
    cap_add: tuple[YScalar, ...]
    init: bool = False

    @classmethod
    def of(cls, node: YMap, *, init: bool = False, resources_key: str = "resources") -> Container:
        """Build the view of one container mapping."""
        res = node.get(resources_key)
        gpu = None
        for part in ("limits", "requests"):
            sub = dig(res, part)
            if isinstance(sub, YMap):
                for g in GPU_RESOURCES:
                    gpu = gpu or (sub.get(g) if g in sub else None)
        env = tuple(
            EnvVar(str(text(e.get("name"))), e.get("value"), e)
            for e in seq_maps(node.get("env"))
            if isinstance(e.get("name"), YScalar)
        )
        mounts = tuple(
            VolumeMount(text(m.get("name")), m.get("mountPath"), m)
            for m in seq_maps(node.get("volumeMounts"))
        )
        sc = node.get("securityContext")
        return cls(
            node=node,
            name=text(node.get("name")),
            image=node.get("image"),
            command=node.get("command"),
            args=node.get("args"),
            resources=res,
            memory_limit=dig(res, "limits", "memory"),
            memory_request=dig(res, "requests", "memory"),
            gpu=gpu,
            env=env,
            volume_mounts=mounts,
            privileged=dig(sc, "privileged"),
            cap_add=tuple(scalars(dig(sc, "capabilities", "add"))),
            init=init,
        )


@dataclass(frozen=True)
class Volume:
    """``volumes[]``: name, the entry node, and the shm-relevant sources.

    Attributes:
        empty_dir: the ``emptyDir`` node (``{}`` or a mapping), or None.
        medium, size_limit: ``emptyDir.medium`` / ``emptyDir.sizeLimit``.
        host_path: ``hostPath.path``.
    """

    name: str | None
    node: YMap
    empty_dir: YNode | None
    medium: YNode | None
    size_limit: YNode | None
    host_path: YNode | None

    @classmethod
    def of(cls, node: YMap) -> Volume:
        """Build the view of one volume mapping."""
        ed = node.get("emptyDir")
        return cls(
            name=text(node.get("name")),
            node=node,
            empty_dir=ed,
            medium=dig(ed, "medium"),
            size_limit=dig(ed, "sizeLimit"),
            host_path=dig(node, "hostPath", "path"),
        )

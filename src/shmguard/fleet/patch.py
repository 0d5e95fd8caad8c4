"""The JSONPatch (RFC 6902) operations the webhook returns: only ``add``.

Paths are JSON Pointers (RFC 6901: ``~`` is written ``~0`` and ``/`` ``~1``, so the annotation
``shmguard.io/decision`` is ``/metadata/annotations/shmguard.io~1decision``). A member that
does not exist yet (``/metadata/annotations``, ``/spec/volumes``, a container's
``volumeMounts``) is added whole; an array that exists gets an item appended with ``/-``.
``add`` on an existing object member replaces its value (RFC 6902 section 4.1), which is how
a raised memory limit is written without a ``replace``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shmguard.fleet import names
from shmguard.fleet.pods import PodContainer, as_list, as_map
from shmguard.lint.config._k8sfix import volume_value
from shmguard.units import format_k8s_quantity

Op = dict[str, Any]


def pointer(*parts: str | int) -> str:
    """A JSON Pointer (RFC 6901) to ``parts``: ``~`` written ``~0`` and ``/`` written ``~1``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def add(value: Any, *parts: str | int) -> Op:
    """``{"op": "add", "path": pointer(*parts), "value": value}``."""
    return {"op": "add", "path": pointer(*parts), "value": value}


def free_volume_name(spec: Mapping[str, Any]) -> str:
    """``shmguard-dshm``, or ``shmguard-dshm-<n>`` with the smallest n no volume uses."""
    taken = {as_map(v).get("name") for v in as_list(spec.get("volumes"))}
    name, n = names.VOLUME_NAME, 0
    while name in taken:
        n += 1
        name = f"{names.VOLUME_NAME}-{n}"
    return name


def memory_volume(spec: Mapping[str, Any], name: str) -> bool:
    """Whether the pod's volume ``name`` is a memory-backed emptyDir."""
    for v in as_list(spec.get("volumes")):
        vol = as_map(v)
        if vol.get("name") == name:
            return as_map(vol.get("emptyDir")).get("medium") == "Memory"
    return False


def shm_ops(
    spec: Mapping[str, Any],
    containers: Sequence[PodContainer],
    todo: Sequence[PodContainer],
    size: int,
    raises: Mapping[int, int],
) -> list[Op]:
    """Ops giving each container of ``todo`` a /dev/shm mount of one memory-backed emptyDir of
    ``size`` bytes (the one another container of ``containers`` already mounts at /dev/shm,
    else a new ``shmguard-dshm``), and the memory limits in ``raises`` (container index ->
    bytes)."""
    reuse = next(
        (c.shm_volume for c in containers if c.shm_volume and memory_volume(spec, c.shm_volume)),
        None,
    )
    ops: list[Op] = []
    name = reuse or free_volume_name(spec)
    if reuse is None:
        vol = volume_value(name, size)
        if isinstance(spec.get("volumes"), list):
            ops.append(add(vol, "spec", "volumes", "-"))
        else:
            ops.append(add([vol], "spec", "volumes"))
    for c in todo:
        mount = {"name": name, "mountPath": "/dev/shm"}
        base = ("spec", "containers", c.index)
        if c.has_mounts:
            ops.append(add(mount, *base, "volumeMounts", "-"))
        else:
            ops.append(add([mount], *base, "volumeMounts"))
        if c.index in raises:
            q = format_k8s_quantity(raises[c.index])
            ops.append(add(q, *base, "resources", "limits", "memory"))
    return ops


def annotation_ops(obj: Mapping[str, Any], message: str, *, overwrite: bool) -> list[Op]:
    """Ops writing ``message`` as the decision annotation: none when the pod has one and
    ``overwrite`` is False (a reinvocation keeps the first decision), or the same one."""
    meta = obj.get("metadata")
    key = names.DECISION_ANNOTATION
    if not isinstance(meta, Mapping):
        return [add({"annotations": {key: message}}, "metadata")]
    ann = meta.get("annotations")
    if not isinstance(ann, Mapping):
        return [add({key: message}, "metadata", "annotations")]
    if key in ann and (not overwrite or ann[key] == message):
        return []
    return [add(message, "metadata", "annotations", key)]

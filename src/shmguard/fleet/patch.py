"""The JSONPatch (RFC 6902) operations the webhook returns: only ``add``.

Paths are JSON Pointers (RFC 6901: ``~`` is written ``~0`` and ``/`` ``~1``, so the annotation
``shmguard.io/decision`` is ``/metadata/annotations/shmguard.io~1decision``). A member that
does not exist yet (``/metadata/annotations``, ``/spec/volumes``, a container's
``volumeMounts``) is added whole; an array that exists gets an item appended with ``/-``.
The /dev/shm operations are the fix plan's (:func:`shmguard.fix.k8s.json_patch`); this module
adds the decision annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shmguard.fix.k8s import Op, add
from shmguard.fleet import names


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

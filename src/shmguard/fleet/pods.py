"""A Pod as the API server sends it (a JSON object): its containers, their workload class, and
the sizing inputs the webhook reads from its annotations.

The workload class is ``check``'s own: :func:`~shmguard.sources.workload.classify` over
the same facts :func:`~shmguard.sources.detect.pod_container_workload` reads from a
manifest (image, command and args, environment variable names, an accelerator request among
:data:`~shmguard.sources.k8s_model.GPU_RESOURCES`, the pod's ``shmguard.io/`` labels and
annotations), and a container needs /dev/shm when SHM001 would flag it
(:func:`~shmguard.lint.config.shm001_ml_without_shm.strong`: evidence beyond a GPU request).
Field names follow ``k8s.io/api/core/v1`` (``Pod``, ``Container``, ``VolumeMount``,
``ResourceRequirements``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shmguard.config import ANNOTATIONS
from shmguard.lint.config._base import is_dev_shm
from shmguard.sources.k8s_model import GPU_RESOURCES
from shmguard.sources.workload import Workload, classify, strong
from shmguard.units import SizeError, k8s_quantity_bytes

#: The annotation and label names :func:`classify` reads.
_READ = frozenset(ANNOTATIONS.values())


def as_map(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty mapping (a malformed field reads as
    absent, never raises)."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    """``value`` when it is a JSON array, else an empty list."""
    return value if isinstance(value, list) else []


def _words(value: object) -> str:
    return " ".join(str(w) for w in as_list(value) if isinstance(w, str))


def strings(value: object) -> dict[str, str]:
    """The string entries of a JSON object (``metadata.annotations``, ``labels``)."""
    return {k: v for k, v in as_map(value).items() if isinstance(k, str) and isinstance(v, str)}


@dataclass(frozen=True)
class PodContainer:
    """One main container of a pod.

    Attributes:
        index: its index in ``spec.containers`` (for JSONPatch paths).
        name: its name ("" when absent).
        workload: its class and evidence, as ``check`` decides them.
        needs_shm: True when ``check`` (SHM001) would ask for a /dev/shm for it.
        shm_volume: the volume it mounts at /dev/shm, "" for a mount without a name, None when
            it mounts nothing there.
        has_mounts: ``volumeMounts`` is present (an array).
        memory_limit: ``resources.limits.memory`` in bytes, None when absent or unreadable.
        has_limits: ``resources.limits`` is present (an object).
        has_resources: ``resources`` is present (an object).
    """

    index: int
    name: str
    workload: Workload
    needs_shm: bool
    shm_volume: str | None
    has_mounts: bool
    memory_limit: int | None
    has_limits: bool
    has_resources: bool


def container_workload(c: Mapping[str, Any], meta: Mapping[str, str]) -> Workload:
    """The class of container ``c`` (a JSON object) of a pod whose ``shmguard.io/`` labels and
    annotations are ``meta``: the same inputs as ``check`` reads from a manifest."""
    cmd = " ".join(x for x in (_words(c.get("command")), _words(c.get("args"))) if x)
    image = c.get("image")
    res = as_map(c.get("resources"))
    gpus = [
        (f"GPU request {g}: {as_map(res.get(part))[g]}", None)
        for part in ("limits", "requests")
        for g in GPU_RESOURCES
        if g in as_map(res.get(part))
    ][:1]
    return classify(
        images=[(image, None)] if isinstance(image, str) else [],
        commands=[(cmd, None)] if cmd else [],
        env=[
            (str(e["name"]), None)
            for e in as_list(c.get("env"))
            if isinstance(as_map(e).get("name"), str)
        ],
        gpus=gpus,
        annotations={k: (v, None) for k, v in meta.items() if k in _READ},
    )


def _memory_limit(limits: Mapping[str, Any]) -> int | None:
    value = limits.get("memory")
    if not isinstance(value, str | int) or isinstance(value, bool):
        return None
    try:
        return k8s_quantity_bytes(str(value)) or None
    except SizeError:
        return None


def read_containers(spec: Mapping[str, Any], meta: Mapping[str, str]) -> tuple[PodContainer, ...]:
    """The main containers of a pod spec (init and ephemeral containers are not read: ``check``
    does not size them either)."""
    out = []
    for i, raw in enumerate(as_list(spec.get("containers"))):
        c = as_map(raw)
        wl = container_workload(c, meta)
        mounts = c.get("volumeMounts")
        at_shm = next(
            (
                str(as_map(m).get("name") or "")
                for m in as_list(mounts)
                if is_dev_shm(
                    as_map(m).get("mountPath")
                    if isinstance(as_map(m).get("mountPath"), str)
                    else None
                )
            ),
            None,
        )
        res = c.get("resources")
        limits = as_map(res).get("limits")
        out.append(
            PodContainer(
                index=i,
                name=str(c.get("name") or ""),
                workload=wl,
                needs_shm=strong(wl),
                shm_volume=at_shm,
                has_mounts=isinstance(mounts, list),
                memory_limit=_memory_limit(as_map(limits)),
                has_limits=isinstance(limits, Mapping),
                has_resources=isinstance(res, Mapping),
            )
        )
    return tuple(out)

"""A Pod as the API server sends it (a JSON object): its containers, their workload class, and
the sizing inputs the webhook reads from its annotations.

The workload class is ``check``'s own: :func:`~shmguard.sources.workload.classify` over
the same facts :func:`~shmguard.sources.detect.pod_container_workload` reads from a
manifest (image, command and args, environment variable names, an accelerator request among
:data:`~shmguard.sources.k8s_model.GPU_RESOURCES`, the pod's ``shmguard.io/`` labels and
annotations), and a container needs /dev/shm when SHM001 would flag it
(:func:`~shmguard.sources.workload.strong`: evidence beyond a GPU request).
Field names follow ``k8s.io/api/core/v1`` (``Pod``, ``Container``, ``VolumeMount``,
``ResourceRequirements``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shmguard.config import ANNOTATIONS
from shmguard.fix.k8s import ContainerView, MountView, PodView, VolumeView
from shmguard.sources.detect import gpu_number
from shmguard.sources.k8s_model import GPU_RESOURCES
from shmguard.sources.workload import Workload, classify, no_shm_need, strong
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
        view: its mounts, memory limit and request as the fix plan reads them
            (:class:`~shmguard.fix.k8s.ContainerView`; ``view.index`` is its index in
            ``spec.containers``).
        workload: its class and evidence, as ``check`` decides them.
        needs_shm: True when ``check`` (SHM001) would ask for a /dev/shm for it.
        no_need: for an ML container whose own arguments say it needs no /dev/shm beyond the
            default, why (:func:`~shmguard.sources.workload.no_shm_need`: SHM001 reports it at
            info only); None otherwise.
    """

    view: ContainerView
    workload: Workload
    needs_shm: bool
    no_need: str | None = None

    @property
    def index(self) -> int:
        """Its index in ``spec.containers``."""
        return self.view.index

    @property
    def name(self) -> str:
        """Its name ("" when absent)."""
        return self.view.name or ""

    @property
    def shm_volume(self) -> str | None:
        """The volume it mounts at /dev/shm, "" for a mount without a name, None for none."""
        return self.view.shm_volume

    @property
    def memory_limit(self) -> int | None:
        """``resources.limits.memory`` in bytes, None when absent or unreadable."""
        return self.view.memory_limit


def container_workload(c: Mapping[str, Any], meta: Mapping[str, str]) -> Workload:
    """The class of container ``c`` (a JSON object) of a pod whose ``shmguard.io/`` labels and
    annotations are ``meta``: the same inputs as ``check`` reads from a manifest."""
    cmd = " ".join(x for x in (_words(c.get("command")), _words(c.get("args"))) if x)
    image = c.get("image")
    res = as_map(c.get("resources"))
    found = [
        (g, as_map(res.get(part))[g])
        for part in ("limits", "requests")
        for g in GPU_RESOURCES
        if g in as_map(res.get(part))
    ][:1]
    gpus = [(f"GPU request {g}: {n}", None) for g, n in found]
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
        gpu_count=_gpu_count(found[0][1]) if found else 0,
    )


def _gpu_count(value: object) -> int | None:
    """A GPU quantity as the API server sends it (``1``, ``"2"``), None when not a whole number:
    read as ``check`` reads the same field (:func:`~shmguard.sources.detect.gpu_number`)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return gpu_number(str(value))


#: The most bytes a Kubernetes quantity holds: an int64 ("no quantity may represent a number
#: greater than 2^63-1 in magnitude", k8s.io/apimachinery ``resource.Quantity``). A pod's
#: value above it (``1e999``, 4,000 nines) is read as unreadable: the API server refuses it
#: anyway, and no size is computed from it.
QUANTITY_MAX = 2**63 - 1


def quantity_bytes(value: object) -> int | None:
    """Bytes of a quantity field as the kubelet reads it (a string, or a JSON integer:
    k8s.io/apimachinery ``resource.Quantity``), None when absent, malformed or over
    :data:`QUANTITY_MAX`."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        return None
    try:
        n = k8s_quantity_bytes(str(value))
    except (SizeError, ValueError, OverflowError):  # int() and str() of huge numbers too
        return None
    return n if n <= QUANTITY_MAX else None


def _memory(part: Mapping[str, Any]) -> int | None:
    return quantity_bytes(part.get("memory")) or None


def read_containers(spec: Mapping[str, Any], meta: Mapping[str, str]) -> tuple[PodContainer, ...]:
    """The main containers of a pod spec (init and ephemeral containers are not read: ``check``
    does not size them either)."""
    out = []
    for i, raw in enumerate(as_list(spec.get("containers"))):
        wl = container_workload(as_map(raw), meta)
        why = no_shm_need(wl) if strong(wl) else None
        out.append(PodContainer(_container_view(raw, i, False), wl, strong(wl) and not why, why))
    return tuple(out)


def _container_view(raw: object, index: int, init: bool) -> ContainerView:
    c = as_map(raw)
    res = as_map(c.get("resources"))
    mounts = c.get("volumeMounts")
    return ContainerView(
        index=index,
        name=c.get("name") if isinstance(c.get("name"), str) else None,
        init=init,
        mounts=tuple(
            MountView(
                name if isinstance(name := as_map(m).get("name"), str) else None,
                path if isinstance(path := as_map(m).get("mountPath"), str) else None,
            )
            for m in as_list(mounts)
        ),
        memory_limit=_memory(as_map(res.get("limits"))),
        memory_request=_memory(as_map(res.get("requests"))),
        has_mount_list=isinstance(mounts, list),
    )


def _volume_view(v: object) -> VolumeView:
    name = as_map(v).get("name")
    ed = as_map(as_map(v).get("emptyDir"))
    limit = ed.get("sizeLimit")
    size = quantity_bytes(limit)
    return VolumeView(
        name if isinstance(name, str) else None,
        ed.get("medium") == "Memory",
        size,
        limit is not None,
    )


def json_pod_view(spec: Mapping[str, Any]) -> PodView:
    """The fix plan's view (:class:`~shmguard.fix.k8s.PodView`) of a pod spec as the API
    server sends it: the same facts :func:`shmguard.fix.k8s.pod_view` reads from a manifest."""
    return PodView(
        containers=tuple(
            _container_view(c, i, False) for i, c in enumerate(as_list(spec.get("containers")))
        ),
        init_containers=tuple(
            _container_view(c, i, True) for i, c in enumerate(as_list(spec.get("initContainers")))
        ),
        volumes=tuple(_volume_view(v) for v in as_list(spec.get("volumes"))),
        has_volume_list=isinstance(spec.get("volumes"), list),
    )

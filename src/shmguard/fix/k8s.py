"""The one Kubernetes /dev/shm fix plan: what a pod needs, decided once, written many ways.

Input: a neutral description of the pod (:class:`PodView`: its containers' /dev/shm-relevant
mounts, memory limits and requests, its volumes), which both pod models produce
(:func:`pod_view` from ``check``'s YAML :class:`~shmguard.sources.k8s.PodSpec`,
:func:`~shmguard.fleet.pods.json_pod_view` from the API server's JSON), the containers that need
a /dev/shm, the size (bytes, decided by the caller's size decision) and, optionally, how a
memory limit is raised. Output: a :class:`PodFix` (:func:`plan_pod`), which the emitters write:
:func:`json_patch` (the webhook), :func:`strategic_merge_patch` (``recommend --patches``),
:func:`volume_entry` / :func:`mount_entry` (the shapes every writer uses, the Kyverno mutate's
too); :mod:`shmguard.fix.k8s_yaml` writes it as YAML edits (``check --fix``, ``recommend
--manifests``), and the snippet renderer prints the same shapes.

What the plan decides:

* the volume: a memory-backed emptyDir the pod already mounts at /dev/shm in some container
  (main or init), else a memory emptyDir no container mounts, is reused (an emptyDir is shared
  by the pod's containers; only the mount is added); otherwise one is added, named
  :data:`VOLUME_NAME` (``dshm``, the name config_formats.md 4.2 and 12 find conventional), or
  ``dshm-<n>`` with the smallest n no volume of the pod uses; a reused volume without
  ``sizeLimit`` gets the size (:data:`RESIZE`), one with a ``sizeLimit`` keeps it
  (:data:`REUSE`: the plan's size is what the pod gets, the decided one ``not_applied``);
* the containers: each container that needs /dev/shm and mounts nothing there gets a mount;
* memory: when a raise is asked, each such container with a memory limit gets the raised limit,
  and where its ``requests.memory`` equals its ``limits.memory`` the request rises with it
  (:func:`raised_request`), so a Guaranteed pod stays Guaranteed (Kubernetes docs, "Pod Quality
  of Service Classes": Guaranteed needs requests equal to limits for memory and cpu in every
  container; a raise that changed the limit only would make it Burstable). A request below the
  limit stays; a container without a limit gets none.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shmguard.fix.names import LEGACY_VOLUME_NAMES as LEGACY_VOLUME_NAMES
from shmguard.fix.names import VOLUME_NAME as VOLUME_NAME
from shmguard.model.fix import Change, shm_changes
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Container, is_dev_shm, quantity_bytes, text
from shmguard.units import format_k8s_quantity

#: A JSONPatch (RFC 6902) operation.
Op = dict[str, Any]


@dataclass(frozen=True)
class MountView:
    """``volumeMounts[]``: the volume's name and the mount path (None when absent)."""

    name: str | None
    path: str | None


@dataclass(frozen=True)
class ContainerView:
    """A container as the plan sees it.

    Attributes:
        index: its index in its list (``containers`` or ``initContainers``).
        name: its name, None when absent.
        init: True for an init container.
        mounts: its ``volumeMounts``.
        memory_limit, memory_request: ``resources.limits.memory`` / ``requests.memory`` in
            bytes, None when absent or unreadable.
        has_mount_list: ``volumeMounts`` is present as a list (a JSONPatch appends to it).
    """

    index: int
    name: str | None
    init: bool = False
    mounts: tuple[MountView, ...] = ()
    memory_limit: int | None = None
    memory_request: int | None = None
    has_mount_list: bool = False

    @property
    def shm_volume(self) -> str | None:
        """The volume mounted at /dev/shm ("" for a mount without a name), None for none."""
        return next((m.name or "" for m in self.mounts if is_dev_shm(m.path)), None)


@dataclass(frozen=True)
class VolumeView:
    """``volumes[]``: its name, whether it is a memory-backed emptyDir, its ``emptyDir``
    ``sizeLimit`` in bytes (None when absent or unreadable) and whether the key is there at
    all (``has_size_limit``: an unreadable one is the user's too, never overwritten)."""

    name: str | None
    memory: bool = False
    size_limit: int | None = None
    has_size_limit: bool = False


@dataclass(frozen=True)
class PodView:
    """A pod spec as the plan sees it: main containers, init containers, volumes;
    ``has_volume_list``: ``volumes`` is present as a list."""

    containers: tuple[ContainerView, ...]
    init_containers: tuple[ContainerView, ...] = ()
    volumes: tuple[VolumeView, ...] = ()
    has_volume_list: bool = False


@dataclass(frozen=True)
class ContainerFix:
    """What one container gets.

    Attributes:
        container: the container.
        mount: True when it gets the /dev/shm mount.
        memory_limit: the new ``limits.memory`` in bytes, None when it stays.
        memory_request: the new ``requests.memory`` in bytes, None when it stays.
    """

    container: ContainerView
    mount: bool
    memory_limit: int | None = None
    memory_request: int | None = None


#: What happens to the volume: added, an existing one reused as it is, an existing one resized.
ADD, REUSE, RESIZE = "add", "reuse", "resize"


@dataclass(frozen=True)
class PodFix:
    """The plan for one pod.

    Attributes:
        volume: the memory-backed emptyDir mounted at /dev/shm.
        action: :data:`ADD` (written whole with ``sizeLimit``), :data:`REUSE` (left as it is:
            only mounts are added) or :data:`RESIZE` (its ``sizeLimit`` set).
        size: the /dev/shm size in bytes the pod gets, None when /dev/shm stays as it is
            (only memory changes) or when a reused volume's ``sizeLimit`` is unreadable.
        containers: the containers that change, in the pod's order.
    """

    volume: str
    action: str
    size: int | None
    containers: tuple[ContainerFix, ...]
    #: the size that was decided, in bytes, when the plan keeps an existing volume's other
    #: ``sizeLimit`` (``size`` is then that sizeLimit: what the pod gets); else None.
    not_applied: int | None = None

    @property
    def writes_volume(self) -> bool:
        """Whether the volume entry is written (added or resized)."""
        return self.action != REUSE and self.size is not None

    def changes(self) -> tuple[Change, ...]:
        """The fix as values for the snippet renderer: the size and the largest new memory
        limit, for Kubernetes (empty when /dev/shm stays)."""
        if self.size is None:
            return ()
        limits = [c.memory_limit for c in self.containers if c.memory_limit is not None]
        return shm_changes(self.size, max(limits) if limits else None, ("kubernetes",))


def raised_request(limit: int | None, request: int | None, new_limit: int) -> int | None:
    """The new ``requests.memory`` of a container whose ``limits.memory`` goes from ``limit``
    to ``new_limit`` bytes: ``new_limit`` when the request equalled the old limit (a Guaranteed
    pod stays Guaranteed), else None (the request stays). A request left unset needs nothing:
    the API server defaults it to the limit."""
    if limit is not None and request is not None and request == limit and new_limit != limit:
        return new_limit
    return None


def reusable(pod: PodView) -> VolumeView | None:
    """A memory-backed emptyDir of ``pod`` a fix can mount instead of adding one: one that a
    container (main or init) mounts at /dev/shm, else one no container mounts at all."""
    mounted: dict[str, list[str | None]] = {}
    for c in (*pod.containers, *pod.init_containers):
        for m in c.mounts:
            if m.name is not None:
                mounted.setdefault(m.name, []).append(m.path)
    memory = [v for v in pod.volumes if v.memory and v.name]
    for v in memory:
        if any(is_dev_shm(p) for p in mounted.get(v.name or "", ())):
            return v
    return next((v for v in memory if v.name not in mounted), None)


def reusable_volume(pod: PodView) -> str | None:
    """The name of :func:`reusable`'s volume, or None."""
    v = reusable(pod)
    return v.name if v is not None else None


def free_name(pod: PodView) -> str:
    """:data:`VOLUME_NAME`, or ``dshm-<n>`` with the smallest n that no volume of ``pod``
    uses."""
    taken = {v.name for v in pod.volumes}
    name, n = VOLUME_NAME, 0
    while name in taken:
        n += 1
        name = f"{VOLUME_NAME}-{n}"
    return name


def plan_pod(
    pod: PodView,
    needs: Iterable[ContainerView],
    size: int,
    raise_limit: Callable[[int], int] | None = None,
) -> PodFix:
    """The plan giving each container of ``needs`` (containers of ``pod``) that mounts nothing
    at /dev/shm a mount of one memory-backed emptyDir of ``size`` bytes (see the module
    docstring for which); with ``raise_limit`` (current limit bytes -> new limit bytes) each
    such container's memory limit is raised, and its request with it where they were equal.

    A reused volume without ``sizeLimit`` gets ``size`` (:data:`RESIZE`: the tmpfs is bounded,
    as SHM008 asks). One with a ``sizeLimit`` keeps it (:data:`REUSE`: a user's volume is never
    resized silently): the plan's ``size`` is that sizeLimit, what the pod gets, and
    ``not_applied`` is ``size`` when the two differ."""
    reuse = reusable(pod)
    fixes = []
    for c in needs:
        if c.shm_volume is not None:
            continue
        limit = request = None
        if raise_limit is not None and c.memory_limit is not None:
            new = raise_limit(c.memory_limit)
            if new != c.memory_limit:
                limit = new
                request = raised_request(c.memory_limit, c.memory_request, new)
        fixes.append(ContainerFix(c, True, limit, request))
    if reuse is not None and reuse.name:
        if not reuse.has_size_limit:
            return PodFix(reuse.name, RESIZE, size, tuple(fixes))
        kept = reuse.size_limit
        return PodFix(reuse.name, REUSE, kept, tuple(fixes), None if kept == size else size)
    return PodFix(free_name(pod), ADD, size, tuple(fixes))


def volume_entry(name: str, quantity: str) -> dict[str, Any]:
    """The volume entry: ``{name, emptyDir: {medium: Memory, sizeLimit: quantity}}``
    (``quantity`` in Kubernetes syntax, ``1Gi``)."""
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": quantity}}


def mount_entry(name: str) -> dict[str, Any]:
    """The mount entry: ``{name, mountPath: /dev/shm}``."""
    return {"name": name, "mountPath": "/dev/shm"}


def pointer(*parts: str | int) -> str:
    """A JSON Pointer (RFC 6901) to ``parts``: ``~`` written ``~0`` and ``/`` written ``~1``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def add(value: Any, *parts: str | int) -> Op:
    """``{"op": "add", "path": pointer(*parts), "value": value}``."""
    return {"op": "add", "path": pointer(*parts), "value": value}


def json_patch(plan: PodFix, pod: PodView, base: tuple[str, ...] = ("spec",)) -> list[Op]:
    """The JSONPatch (RFC 6902, only ``add``) operations that apply ``plan`` to the pod
    described by ``pod``, whose spec is at ``base``: the volume (appended with ``/-``, or the
    ``volumes`` list added; for a :data:`RESIZE` plan, the reused volume's
    ``emptyDir/sizeLimit``), then for each container its mount, its memory limit and request.
    ``add`` on an existing member replaces its value (RFC 6902 section 4.1).

    Raises:
        ValueError: for a :data:`RESIZE` plan whose volume is not a memory emptyDir of
            ``pod`` without ``sizeLimit`` (a JSONPatch never overwrites a user's size).
    """
    ops: list[Op] = []
    if plan.action == RESIZE and plan.size is not None:
        index = next(
            (
                i
                for i, v in enumerate(pod.volumes)
                if v.name == plan.volume and v.memory and not v.has_size_limit
            ),
            None,
        )
        if index is None:
            raise ValueError(
                f"a JSONPatch does not resize {plan.volume!r}: no memory emptyDir of the pod "
                "without a sizeLimit"
            )
        quantity = format_k8s_quantity(plan.size)
        ops.append(add(quantity, *base, "volumes", index, "emptyDir", "sizeLimit"))
    elif plan.writes_volume:
        assert plan.size is not None
        vol = volume_entry(plan.volume, format_k8s_quantity(plan.size))
        if pod.has_volume_list:
            ops.append(add(vol, *base, "volumes", "-"))
        else:
            ops.append(add([vol], *base, "volumes"))
    for f in plan.containers:
        c = f.container
        at = (*base, "initContainers" if c.init else "containers", c.index)
        if f.mount:
            if c.has_mount_list:
                ops.append(add(mount_entry(plan.volume), *at, "volumeMounts", "-"))
            else:
                ops.append(add([mount_entry(plan.volume)], *at, "volumeMounts"))
        # a limit or request that is raised exists: its resources object is there
        if f.memory_limit is not None:
            q = format_k8s_quantity(f.memory_limit)
            ops.append(add(q, *at, "resources", "limits", "memory"))
        if f.memory_request is not None:
            q = format_k8s_quantity(f.memory_request)
            ops.append(add(q, *at, "resources", "requests", "memory"))
    return ops


#: Where the pod spec and the pod template's metadata lie in each workload kind, as key paths
#: (the Kubernetes API reference of each kind). ``Job/DaemonSet`` (a name that cannot tell
#: which) works for both: they share the path.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    **{
        k: ("spec", "template")
        for k in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Job/DaemonSet")
    },
}


def strategic_merge_patch(
    kind: str, plan: PodFix, annotation: str | None = None
) -> dict[str, object] | None:
    """A strategic merge patch (``kubectl patch --type strategic``) that applies ``plan`` to
    a workload of ``kind``; None for a kind whose pod spec path is unknown
    (:data:`POD_SPEC_PATHS`: a training operator's replica specs) or when nothing changes.

    Strategic merge keys (Kubernetes API, ``patchMergeKey``): containers by ``name``,
    ``volumeMounts`` by ``mountPath``, ``volumes`` by ``name``, so the patch adds or replaces
    exactly these entries and leaves the rest of the pod spec as it is. A container without a
    name (a node-mode series knows none) is left out. ``annotation``: a key set on the pod
    template to the size (the ``shmguard.io/shm-size`` that ``check --fix`` and the webhook
    read), or None.
    """
    path = POD_SPEC_PATHS.get(kind)
    if path is None:
        return None
    containers: list[dict[str, object]] = []
    for f in plan.containers:
        c: dict[str, object] = {"name": f.container.name or ""}
        if f.mount and plan.size is not None:
            c["volumeMounts"] = [mount_entry(plan.volume)]
        res: dict[str, object] = {}
        if f.memory_limit is not None:
            res["limits"] = {"memory": format_k8s_quantity(f.memory_limit)}
        if f.memory_request is not None:
            res["requests"] = {"memory": format_k8s_quantity(f.memory_request)}
        if res:
            c["resources"] = res
        if f.container.name and len(c) > 1:
            containers.append(c)
    spec: dict[str, object] = {"containers": containers} if containers else {}
    if plan.writes_volume:
        assert plan.size is not None
        spec["volumes"] = [volume_entry(plan.volume, format_k8s_quantity(plan.size))]
    if not spec:
        return None
    template: dict[str, object] = {"spec": spec}
    if annotation and plan.size is not None:
        quantity = format_k8s_quantity(plan.size)
        template = {"metadata": {"annotations": {annotation: quantity}}, **template}
    patch: dict[str, object] = template
    for key in reversed(path):
        patch = {key: patch}
    return patch


def named_plan(
    shm_size: int | None,
    memory_limits: Mapping[str, int | None],
    volume: str | None = None,
) -> PodFix:
    """The plan for a workload known only by its containers' names (``recommend`` reads
    series, not pod specs): each named container mounts ``volume`` when ``shm_size`` is given
    and gets its memory limit where one is given; ``volume`` is an emptyDir the pod has
    (resized) or None (:data:`VOLUME_NAME` is added). The requests are not known, so none is
    set."""
    fixes = tuple(
        ContainerFix(ContainerView(i, name or None), shm_size is not None, limit)
        for i, (name, limit) in enumerate(memory_limits.items())
    )
    return PodFix(volume or VOLUME_NAME, RESIZE if volume else ADD, shm_size, fixes)


def _container_view(c: Container, index: int) -> ContainerView:
    return ContainerView(
        index=index,
        name=c.name,
        init=c.init,
        mounts=tuple(MountView(m.name, text(m.mount_path)) for m in c.volume_mounts),
        memory_limit=quantity_bytes(c.memory_limit) or None,
        memory_request=quantity_bytes(c.memory_request) or None,
        has_mount_list=c.node.get("volumeMounts") is not None,
    )


#: The last pod spec :func:`pod_view` read (weakly: it is not kept alive) and its view.
_LAST_VIEW: tuple[weakref.ref[PodSpec], PodView] | None = None


def pod_view(pod: PodSpec) -> PodView:
    """The plan's view of ``check``'s YAML pod spec (each view's ``index`` is the container's
    position in ``pod.containers`` or ``pod.init_containers``).

    A pod spec is immutable, and ``check`` asks for the view of one pod several times in a row
    (SHM001's and SHM007's reusable volume, the mount plan): the last view is kept while its
    pod lives and given again (a quarter of the views built in a stream of 96k Pods)."""
    global _LAST_VIEW
    last = _LAST_VIEW
    if last is not None and last[0]() is pod:
        return last[1]
    view = _build_view(pod)
    _LAST_VIEW = (weakref.ref(pod), view)
    return view


def _build_view(pod: PodSpec) -> PodView:
    return PodView(
        containers=tuple(_container_view(c, i) for i, c in enumerate(pod.containers)),
        init_containers=tuple(_container_view(c, i) for i, c in enumerate(pod.init_containers)),
        volumes=tuple(
            VolumeView(
                v.name,
                v.empty_dir is not None and text(v.medium) == "Memory",
                quantity_bytes(v.size_limit) if v.size_limit is not None else None,
                v.size_limit is not None,
            )
            for v in pod.volumes
        ),
        has_volume_list=pod.node.get("volumes") is not None,
    )

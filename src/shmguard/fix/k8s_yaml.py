"""The Kubernetes /dev/shm fix as YAML edits: the plan of :mod:`shmguard.fix.k8s` (which
volume, added or reused, and its mount at /dev/shm) spliced into the file.

What is written (config_formats.md 4.2, 12: the conventional ``dshm``)::

    volumes:
      - name: dshm
        emptyDir:
          medium: Memory
          sizeLimit: 1Gi
    ...
    volumeMounts:
      - name: dshm
        mountPath: /dev/shm

The volume goes last into the pod spec's ``volumes`` (the key is added when absent), the mount
last into the container's ``volumeMounts``; both in the style of the file (block or flow, its
sequence indentation; :mod:`~shmguard.fix.yamledit`). What the plan decides
(:func:`~shmguard.fix.k8s.plan_pod`): a volume already named ``dshm``
that is not this one makes the fix pick ``dshm-1``, ``dshm-2``... A memory-backed emptyDir the
pod already mounts at /dev/shm in another container, or a memory emptyDir mounted nowhere, is
reused: only the mount is added (an emptyDir is shared by the pod's containers).
"""

from __future__ import annotations

import bisect
import itertools
import weakref

import yaml

from shmguard.fix import k8s
from shmguard.fix.yamledit import (
    Style,
    Value,
    add_entry,
    add_item,
    fill_null,
    seq_style,
)
from shmguard.model.finding import Edit
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Container, Volume
from shmguard.sources.yamlnode import YMap, YNode, YSeq
from shmguard.units import format_k8s_quantity


def reusable_volume(pod: PodSpec) -> Volume | None:
    """The memory-backed emptyDir of ``pod`` the fix plan mounts instead of adding one
    (:func:`shmguard.fix.k8s.reusable_volume`), or None."""
    name = k8s.reusable_volume(k8s.pod_view(pod))
    return next((v for v in pod.volumes if v.name == name), None) if name else None


class _SharedRanges:
    """Character ranges of the nodes that occur more than once under a document root (an
    anchor and its aliases): text inside them is used in several places. Built once per
    document (a List of 2,000 Pods asks for each Pod) and asked in O(log n) per node."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, root: yaml.Node, limit: int = 200_000) -> None:
        seen: set[int] = set()
        shared: dict[int, yaml.Node] = {}
        stack = [root]
        while stack and len(seen) < limit:
            n = stack.pop()
            if id(n) in seen:
                shared[id(n)] = n
                continue
            seen.add(id(n))
            if isinstance(n, yaml.MappingNode):
                stack += [x for kv in n.value for x in kv]
            elif isinstance(n, yaml.SequenceNode):
                stack += n.value
        spans = sorted((int(n.start_mark.index), int(n.end_mark.index)) for n in shared.values())
        self._starts = [a for a, _ in spans]
        self._ends = list(itertools.accumulate((b for _, b in spans), max))  # running max

    def cover(self, a: int, b: int) -> bool:
        """True when one shared range holds all of ``[a, b]``."""
        i = bisect.bisect_right(self._starts, a)  # the ranges starting at or before a
        return i > 0 and self._ends[i - 1] >= b


#: One :class:`_SharedRanges` per document root node, while the document lives (None: no
#: ``&`` in the document's text, so no node occurs twice).
_SHARED: weakref.WeakKeyDictionary[yaml.Node, _SharedRanges | None] = weakref.WeakKeyDictionary()


def _shared_ranges(root: yaml.Node, text: str) -> _SharedRanges | None:
    if root in _SHARED:
        return _SHARED[root]
    # a node can occur twice in the graph only through an alias, so only with an anchor
    anchored = text.find("&", root.start_mark.index, root.end_mark.index) != -1
    found = _SHARED[root] = _SharedRanges(root) if anchored else None
    return found


def placeable(pod: PodSpec, *nodes: YNode | None) -> bool:
    """True when every node lies inside its object and in no anchored text used twice in the
    object's document (a List's items can alias each other's anchors: an edit there would
    change another object too)."""
    obj = pod.obj.node.node
    lo, hi = obj.start_mark.index, obj.end_mark.index
    root = pod.obj.doc_root if pod.obj.doc_root is not None else obj
    shared = _shared_ranges(root, pod.obj.node.src.text)
    for node in nodes:
        if node is None:
            continue
        a, b = node.node.start_mark.index, node.node.end_mark.index
        if node.shared or not (lo <= a and b <= hi):
            return False
        if shared is not None and shared.cover(a, b):
            return False
    return True


def _style(pod: PodSpec) -> Style:
    node = pod.node
    return seq_style(node.key_node("containers"), node.get("containers"))


def mount_plan(pod: PodSpec, container: Container, size: int) -> k8s.PodFix | None:
    """The fix plan (:func:`shmguard.fix.k8s.plan_pod`) giving ``container`` of ``pod`` a
    /dev/shm of ``size`` bytes, or None when ``container`` is not one of ``pod``'s."""
    view = k8s.pod_view(pod)
    where = (view.init_containers, pod.init_containers) if container.init else None
    views, nodes = where or (view.containers, pod.containers)
    at = next((i for i, x in enumerate(nodes) if x is container), None)
    return None if at is None else k8s.plan_pod(view, [views[at]], size)


def shm_mount_edits(
    pod: PodSpec, container: Container, size: int, plan: k8s.PodFix | None = None
) -> tuple[Edit, ...] | None:
    """The edits that give ``container`` a memory-backed /dev/shm of ``size`` bytes, or None
    when they cannot be placed exactly (anchors, aliases, a ``volumes:`` that is neither a list
    nor a null, a TrainJob whose
    pod spec lives in its runtime). ``plan``: :func:`mount_plan` of the same arguments, when
    the caller has it (else it is made here)."""
    volumes_node, mounts_node = pod.node.get("volumes"), container.node.get("volumeMounts")
    if not placeable(pod, pod.node, container.node, volumes_node, mounts_node):
        return None
    if any(n.startswith("trainjob") for n in pod.notes):
        return None
    style = _style(pod)
    edits: list[Edit] = []
    if plan is None:
        plan = mount_plan(pod, container, size)
    if plan is None:
        return None
    name = plan.volume
    # A reused volume without sizeLimit (RESIZE) gets only the mount here: its sizeLimit is
    # SHM008's fix (safe with a size the user chose), one edit for all the pod's containers.
    if plan.action == k8s.ADD:
        vol: dict[str, Value] = k8s.volume_entry(name, format_k8s_quantity(size))
        volumes = volumes_node
        if volumes is None and "volumes" not in pod.node:
            edit = add_entry(pod.node, "volumes", [vol], style)
        elif isinstance(volumes, YSeq):
            edit = add_item(volumes, vol, style)
        else:  # `volumes:` with no value (Helm's rendering of an empty list): filled in
            edit = fill_null(pod.node, "volumes", [vol])
        if edit is None:
            return None
        edits.append(edit)
    mount: dict[str, Value] = k8s.mount_entry(name)
    mounts = mounts_node
    if mounts is None and "volumeMounts" not in container.node:
        edit = add_entry(container.node, "volumeMounts", [mount], style)
    elif isinstance(mounts, YSeq):
        mount_style = seq_style(container.node.key_node("volumeMounts"), mounts, style)
        edit = add_item(mounts, mount, mount_style)
    else:
        edit = fill_null(container.node, "volumeMounts", [mount])
    if edit is None:
        return None
    if edits and edits[0].start == edit.start:
        # the container ends the pod spec: its mount goes first, then the pod's new volumes key
        vol_text = edits[0].content
        if edit.content[:1] in ("\r", "\n") and vol_text[:1] in ("\r", "\n"):
            vol_text = vol_text.lstrip("\r\n")
        return (Edit(edit.start, edit.end, edit.content + vol_text),)
    edits.append(edit)
    return tuple(edits)


def add_size_limit(pod: PodSpec, empty_dir: YMap, size: int) -> Edit | None:
    """An edit adding ``sizeLimit: <size>`` to an emptyDir mapping of ``pod`` (last entry), or
    None when its text is shared through an anchor."""
    if not placeable(pod, empty_dir):
        return None
    style = Style()
    return add_entry(empty_dir, "sizeLimit", format_k8s_quantity(size), style)

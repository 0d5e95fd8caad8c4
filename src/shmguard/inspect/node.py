"""On a Kubernetes node: every pod's shared memory, as tmpfs mounts, with statvfs figures.

Two kinds of mount are found, both from one read of a mountinfo file (proc(5)):

* **emptyDir volumes with** ``medium: Memory``: the kubelet mounts a tmpfs at
  ``<kubelet root>/pods/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>`` (kubernetes
  ``pkg/volume/emptydir/empty_dir.go``: ``setupTmpfs`` for ``StorageMediumMemory``; the path from
  ``pkg/kubelet/kubelet_getters.go`` ``getPodVolumeDir`` and the plugin name
  ``kubernetes.io~empty-dir``). A disk-backed emptyDir is no mount, so it is not listed.
* **the /dev/shm the runtime gives a pod without one**: containerd's CRI plugin mounts a tmpfs at
  ``/run/containerd/io.containerd.grpc.v1.cri/sandboxes/<sandbox id>/shm`` (containerd
  ``internal/cri/server/helpers.go``, ``pkg/cri/server/helpers.go`` before 2.0,
  ``getSandboxDevShm``: the volatile sandbox root dir ``<state>/io.containerd.grpc.v1.cri/
  sandboxes/<id>`` plus ``shm``), CRI-O at
  ``/run/containers/storage/overlay-containers/<sandbox id>/userdata/shm`` (cri-o
  ``server/sandbox_run_linux.go``: ``libsandbox.SetupShm(podContainer.RunDir, ...)``, the run dir
  being containers/storage's ``<runroot>/overlay-containers/<id>/userdata``). Pods with
  ``hostIPC`` get neither.

Which pod a mount belongs to, from what the node itself keeps on disk (never guessed):

* a pod UID to namespace and name: the kubelet's pod log directory
  ``/var/log/pods/<namespace>_<name>_<uid>`` (kubernetes ``pkg/kubelet/kuberuntime/helpers.go``
  ``BuildPodLogsDirectory``; ``_`` cannot occur in a namespace or pod name, both DNS labels or
  subdomains, so the split is exact);
* a sandbox id to namespace, name and UID: the sandbox's OCI ``config.json`` annotations, in
  containerd's shim bundle ``/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/`` as
  ``io.kubernetes.cri.sandbox-namespace`` / ``-name`` / ``-uid`` (containerd
  ``pkg/cri/annotations/annotations.go`` ``DefaultCRIAnnotations``), in CRI-O's run dir
  ``.../userdata/config.json`` (written there by ``runPodSandbox``) as the kubelet's labels
  ``io.kubernetes.pod.namespace`` / ``.name`` / ``.uid`` (``k8s.io/kubelet/pkg/types/labels.go``;
  CRI-O adds the sandbox labels as annotations).

Where none of these is there, the pod's fields are None and :attr:`PodRef.source` says why.
Mounts are read through our own view of the node: in the DaemonSet the host's directories are
hostPath-mounted under ``root`` (``/host``) with ``mountPropagation: HostToContainer``, so the
tmpfs mounts appear in our /proc/self/mountinfo below ``root``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shmguard.inspect.mounts import Mount, MountinfoError, parse_mountinfo
from shmguard.inspect.shm import StatvfsFn

Kind = Literal["emptydir", "containerd", "cri-o"]

KUBELET_ROOT = "/var/lib/kubelet"
POD_LOGS_DIR = "/var/log/pods"
CONTAINERD_STATE = "/run/containerd"
CONTAINERD_NAMESPACE = "k8s.io"
CRIO_RUNROOT = "/run/containers/storage"

_UID = r"[0-9a-fA-F-]{1,64}"
_ID = r"[0-9a-fA-F]{1,128}"
_NAME = r"[^/]+"


@dataclass(frozen=True)
class PodRef:
    """The pod a mount belongs to. ``namespace``, ``name``, ``uid`` are None when the node keeps
    no record of them; ``source`` names the record they came from, or why they are unknown."""

    namespace: str | None
    name: str | None
    uid: str | None
    source: str


@dataclass(frozen=True)
class NodeShmMount:
    """One pod's tmpfs on the node.

    ``kind``: ``emptydir`` (a memory-backed emptyDir), ``containerd`` or ``cri-o`` (the sandbox
    /dev/shm). ``path``: as the node names it (without ``root``). ``volume``: the emptyDir's name;
    ``sandbox_id``: the CRI sandbox id. Sizes are bytes from statvfs: ``size`` = blocks *
    frsize, ``used`` = (blocks - bfree) * frsize, ``avail`` = bavail * frsize.
    """

    kind: Kind
    path: str
    pod: PodRef
    volume: str | None
    sandbox_id: str | None
    size_bytes: int
    used_bytes: int
    avail_bytes: int


@dataclass(frozen=True)
class NodeScan:
    """A scan's mounts (in mountinfo order) and, for each one that could not be measured (it
    vanished mid-scan, it is unreadable), a line ``<path>: <reason>`` in ``skipped``. ``error``
    is set (and ``mounts`` empty) when the mountinfo file itself could not be read."""

    mounts: tuple[NodeShmMount, ...]
    skipped: tuple[str, ...]
    error: str | None = None


def _patterns(
    kubelet_root: str, containerd_state: str, crio_runroot: str
) -> list[tuple[Kind, re.Pattern[str]]]:
    k, c, o = (re.escape(p.rstrip("/")) for p in (kubelet_root, containerd_state, crio_runroot))
    return [
        (
            "emptydir",
            re.compile(
                rf"{k}/pods/(?P<uid>{_UID})/volumes/kubernetes\.io~empty-dir/(?P<vol>{_NAME})"
            ),
        ),
        (
            "containerd",
            re.compile(rf"{c}/io\.containerd\.grpc\.v1\.cri/sandboxes/(?P<id>{_ID})/shm"),
        ),
        ("cri-o", re.compile(rf"{o}/overlay-containers/(?P<id>{_ID})/userdata/shm")),
    ]


class NodeScanner:
    """Finds and measures the pods' tmpfs mounts on a node; reusable across scans.

    Args:
        root: where the node's ``/`` is seen (``/`` on the node itself, ``/host`` in the
            DaemonSet); every node path is read below it.
        mountinfo: the mountinfo file to read (default: this process's ``/proc/self/mountinfo``,
            whose mount points carry the ``root`` prefix). Mount points outside ``root`` are
            ignored.
        statvfs: :func:`os.statvfs` (default) or a recorded one for fixture trees.
        kubelet_root, pod_logs_dir, containerd_state, crio_runroot: the node's paths, defaults
            as the kubelet (``--root-dir``, ``podLogsDir``), containerd (``state``) and
            containers/storage (``runroot``) ship them.
        check_device: whether to check that each path still is the mount mountinfo named
            (its ``st_dev``); default: when ``statvfs`` is :func:`os.statvfs`.

    Sandbox ids' pod records are cached (a sandbox's config.json does not change), and the
    cache is pruned to the sandboxes seen in the last scan.
    """

    def __init__(
        self,
        root: Path = Path("/"),
        *,
        mountinfo: Path | None = None,
        statvfs: StatvfsFn = os.statvfs,
        kubelet_root: str = KUBELET_ROOT,
        pod_logs_dir: str = POD_LOGS_DIR,
        containerd_state: str = CONTAINERD_STATE,
        crio_runroot: str = CRIO_RUNROOT,
        check_device: bool | None = None,
    ) -> None:
        self.root = root
        self._prefix = "" if str(root) == "/" else str(root).rstrip("/")
        self.mountinfo = mountinfo or Path("/proc/self/mountinfo")
        self.statvfs = statvfs
        self.check_device = statvfs is os.statvfs if check_device is None else check_device
        self.pod_logs_dir = pod_logs_dir
        self.containerd_state = containerd_state.rstrip("/")
        self.crio_runroot = crio_runroot.rstrip("/")
        self._patterns = _patterns(kubelet_root, containerd_state, crio_runroot)
        self._sandboxes: dict[tuple[Kind, str], PodRef] = {}
        self._last_text: str | None = None
        self._last_found: dict[str, tuple[Kind, str, re.Match[str]]] = {}

    def scan(self) -> NodeScan:
        """One scan: never raises for a missing, vanished or unreadable path."""
        try:
            text = self.mountinfo.read_text(encoding="utf-8", errors="replace")
            # the mount table changes when a pod comes or goes, not between most scans: the
            # parse and the path matching (half of a 100-pod scan) are kept for the same text
            if text == self._last_text:
                found = self._last_found
            else:
                found = self._pod_mounts(parse_mountinfo(text))
                self._last_text, self._last_found = text, found
        except (OSError, MountinfoError) as err:
            return NodeScan((), (), f"{self.mountinfo}: {err}")
        return self._rest_of_scan(found)

    def _pod_mounts(self, mounts: Iterable[Mount]) -> dict[str, tuple[Kind, str, re.Match[str]]]:
        # one entry per path: a later line is mounted on top of an earlier one at the same place
        found: dict[str, tuple[Kind, str, re.Match[str]]] = {}
        for m in mounts:
            node_path = self._node_path(m)
            if node_path is None or m.fstype != "tmpfs":
                continue
            for kind, pattern in self._patterns:
                match = pattern.fullmatch(node_path)
                if match:
                    found.pop(node_path, None)
                    found[node_path] = (kind, m.device, match)
                    break
        return found

    def _rest_of_scan(self, found: dict[str, tuple[Kind, str, re.Match[str]]]) -> NodeScan:
        """statvfs of each pod mount and its pod, from the mount table's pod mounts."""
        wanted = any(f[0] == "emptydir" for f in found.values())
        logs, logs_error = self._pod_logs() if wanted else ({}, None)
        results: list[NodeShmMount] = []
        skipped: list[str] = []
        seen: set[tuple[Kind, str]] = set()
        for node_path, (kind, device, match) in found.items():
            figures = self._measure(node_path, device)
            if isinstance(figures, str):
                skipped.append(f"{node_path}: {figures}")
                continue
            if kind == "emptydir":
                uid = match["uid"]
                why = logs_error or f"no {self.pod_logs_dir}/<namespace>_<name>_{uid}"
                pod = logs.get(uid) or PodRef(None, None, uid, why)
                volume, sandbox = match["vol"], None
            else:
                sandbox, volume = match["id"], None
                seen.add((kind, sandbox))
                pod = self._sandbox_pod(kind, sandbox)
            results.append(NodeShmMount(kind, node_path, pod, volume, sandbox, *figures))
        self._sandboxes = {k: v for k, v in self._sandboxes.items() if k in seen}
        return NodeScan(tuple(results), tuple(skipped))

    def _node_path(self, mount: Mount) -> str | None:
        point = mount.mount_point
        if not self._prefix:
            return point
        if point.startswith(self._prefix + "/"):
            return point[len(self._prefix) :]
        return None

    def _measure(self, node_path: str, device: str) -> tuple[int, int, int] | str:
        """statvfs figures, or why not. A mount point whose device is no longer the tmpfs
        mountinfo named (unmounted since: statvfs would describe the disk below) is refused."""
        local = self._prefix + node_path
        try:
            st = self.statvfs(local)
            dev = os.stat(local).st_dev if self.check_device else None
        except OSError as err:
            return (err.strerror or str(err)).lower()
        if dev is not None and f"{os.major(dev)}:{os.minor(dev)}" != device:
            return "unmounted during the scan"
        frsize = st.f_frsize
        return (st.f_blocks * frsize, (st.f_blocks - st.f_bfree) * frsize, st.f_bavail * frsize)

    def _pod_logs(self) -> tuple[dict[str, PodRef], str | None]:
        """UID -> pod, from the kubelet's ``<namespace>_<name>_<uid>`` log directories, and why
        there are none when the directory cannot be listed."""
        try:
            names = os.listdir(self._prefix + self.pod_logs_dir)
        except OSError as err:
            return {}, f"{self.pod_logs_dir}: {(err.strerror or str(err)).lower()}"
        refs = {}
        for entry in names:
            parts = entry.split("_")
            if len(parts) == 3 and all(parts):
                ns, name, uid = parts
                refs[uid] = PodRef(ns, name, uid, f"{self.pod_logs_dir}/{entry}")
        return refs, None

    def _sandbox_pod(self, kind: Kind, sandbox: str) -> PodRef:
        cached = self._sandboxes.get((kind, sandbox))
        if cached is not None:
            return cached
        if kind == "containerd":
            path = (
                f"{self.containerd_state}/io.containerd.runtime.v2.task/"
                f"{CONTAINERD_NAMESPACE}/{sandbox}/config.json"
            )
            keys = CONTAINERD_KEYS
        else:
            path = f"{self.crio_runroot}/overlay-containers/{sandbox}/userdata/config.json"
            keys = CRIO_KEYS
        ref = _annotations_ref(self._prefix + path, path, keys)
        if ref.source == path:  # only a record found is cached; a missing one may appear later
            self._sandboxes[(kind, sandbox)] = ref
        return ref


#: The annotation keys holding (namespace, name, uid) in each runtime's sandbox config.json.
CONTAINERD_KEYS = (
    "io.kubernetes.cri.sandbox-namespace",
    "io.kubernetes.cri.sandbox-name",
    "io.kubernetes.cri.sandbox-uid",
)
CRIO_KEYS = ("io.kubernetes.pod.namespace", "io.kubernetes.pod.name", "io.kubernetes.pod.uid")


def _annotations_ref(local: str, path: str, keys: tuple[str, str, str]) -> PodRef:
    try:
        with open(local, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as err:
        return PodRef(None, None, None, f"{path}: {(err.strerror or str(err)).lower()}")
    except ValueError:
        return PodRef(None, None, None, f"{path}: not JSON")
    notes = doc.get("annotations") if isinstance(doc, dict) else None
    if not isinstance(notes, dict):
        return PodRef(None, None, None, f"{path}: no annotations")
    ns, name, uid = (notes.get(k) if isinstance(notes.get(k), str) else None for k in keys)
    if ns is None and name is None:
        return PodRef(None, None, uid, f"{path}: no {keys[0]} / {keys[1]} annotation")
    return PodRef(ns, name, uid, path)


def scan_node(
    root: Path = Path("/"), *, mountinfo: Path | None = None, statvfs: StatvfsFn = os.statvfs
) -> NodeScan:
    """One scan with a fresh :class:`NodeScanner` and the default node paths."""
    return NodeScanner(root, mountinfo=mountinfo, statvfs=statvfs).scan()

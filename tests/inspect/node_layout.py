"""Lay out a node as the kubelet and containerd lay it out, with real tmpfs mounts, below a root.

Run as root inside a private mount namespace (``unshare --mount --propagation private``), so
every mount goes away with the process: ``python node_layout.py ROOT N_PODS MODE``. It mounts,
for pod i in 0..N-1, a 1 MiB tmpfs at
``ROOT/var/lib/kubelet/pods/<uid i>/volumes/kubernetes.io~empty-dir/dshm`` (the memory-backed
emptyDir) holding a file of ``i mod 200`` KiB and a 64 KiB tmpfs at
``.../volumes/kubernetes.io~projected/kube-api`` (the service-account token), makes the pod log dir
``ROOT/var/log/pods/ns<i>_pod-<i>_<uid i>``, and one containerd sandbox /dev/shm (64 MiB)
with its config.json, then prints one JSON line:

* MODE ``scan``: the scan's mounts and skipped lines; the scan removes pod 1's directory
  (umount + rmdir, as the kubelet tears a pod down) while it runs, and unmounts pod 2's tmpfs
  without removing the directory, right before measuring them.
* MODE ``view``: the same node laid out in ``ROOT/node`` and scanned through ``ROOT/host`` as
  the DaemonSet sees it (:func:`as_daemonset_sees_it`), with one pod mounted after the view.
* MODE ``bench``: ``{"scan": [...], "walk": [...]}``, the wall time in ms of each of 50
  scans and of 50 walks of the pods dir (:func:`walk`, the baseline).

The benchmark (benchmarks/node_scan.py) and tests/inspect/test_inspect_node_tmpfs.py use it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from shmguard.inspect.node import NodeScan, NodeScanner

SANDBOX = "c0ffee" * 10 + "c0ff"
KIB = 1024


def uid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-{i:012x}"


def volume(root: Path, i: int) -> Path:
    return root / f"var/lib/kubelet/pods/{uid(i)}/volumes/kubernetes.io~empty-dir/dshm"


def lay_out(root: Path, pods: int) -> None:
    for i in range(pods):
        vol = volume(root, i)
        vol.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(vol)], check=True)
        (vol / "torch_1_1").write_bytes(b"x" * (i % 200) * KIB)
        # every pod also gets the kubelet's projected service-account token: a tmpfs too, and
        # not shared memory (the scan must pass it by)
        token = root / f"var/lib/kubelet/pods/{uid(i)}/volumes/kubernetes.io~projected/kube-api"
        token.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(token)], check=True)
        (root / f"var/log/pods/ns{i}_pod-{i}_{uid(i)}").mkdir(parents=True)
    shm = root / f"run/containerd/io.containerd.grpc.v1.cri/sandboxes/{SANDBOX}/shm"
    shm.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "shm", str(shm)], check=True)
    (shm / "psm_x").write_bytes(b"y" * 3 * 1024 * KIB)
    bundle = root / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{SANDBOX}"
    bundle.mkdir(parents=True)
    notes = {
        "io.kubernetes.cri.sandbox-namespace": "jobs",
        "io.kubernetes.cri.sandbox-name": "no-volume",
        "io.kubernetes.cri.sandbox-uid": uid(9999),
    }
    (bundle / "config.json").write_text(json.dumps({"annotations": notes}))


def walk(root: Path) -> int:
    """The baseline: walk the kubelet pods dir, and statvfs each emptyDir that is a mount point
    (os.path.ismount: a stat of it and of its parent), without pod names or sandbox /dev/shm."""
    found = 0
    pods = root / "var/lib/kubelet/pods"
    for pod in os.listdir(pods):
        vols = pods / pod / "volumes/kubernetes.io~empty-dir"
        for name in os.listdir(vols):
            if os.path.ismount(vols / name):
                os.statvfs(vols / name)
                found += 1
    return found


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def as_daemonset_sees_it(root: Path, pods: int) -> NodeScan:
    """The node laid out in ``root/node`` (a shared mount, as / is on a systemd host), seen at
    ``root/host`` as a DaemonSet's read-only hostPath with ``mountPropagation: HostToContainer``
    sees it (a recursive bind made a slave: the kubelet's rbind + rslave), then one more pod's
    memory emptyDir mounted on the node *after* that, which must propagate into the view."""
    node, view = root / "node", root / "host"
    node.mkdir()
    view.mkdir()
    mount("--bind", str(node), str(node))
    mount("--make-shared", str(node))
    lay_out(node, pods)
    mount("--rbind", str(node), str(view))
    mount("--make-rslave", str(view))
    mount("-o", "remount,bind,ro", str(view))
    late = volume(node, pods)
    late.mkdir(parents=True)
    mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(late))
    (late / "late").write_bytes(b"z" * 8192)
    (node / f"var/log/pods/late_pod-late_{uid(pods)}").mkdir()
    return NodeScanner(view).scan()


def report(scan: NodeScan) -> str:
    mounts = [
        {
            "kind": m.kind,
            "path": m.path,
            "volume": m.volume,
            "sandbox": m.sandbox_id,
            "pod": [m.pod.namespace, m.pod.name, m.pod.uid],
            "size": m.size_bytes,
            "used": m.used_bytes,
            "avail": m.avail_bytes,
        }
        for m in scan.mounts
    ]
    return json.dumps({"mounts": mounts, "skipped": scan.skipped, "error": scan.error})


def main() -> None:
    root, pods, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if mode == "view":
        print(report(as_daemonset_sees_it(root, pods)))
        return
    lay_out(root, pods)
    if mode == "bench":
        scanner = NodeScanner(root)
        times: dict[str, list[float]] = {"scan": [], "walk": []}
        for _ in range(50):
            t0 = time.perf_counter()
            scan = scanner.scan()
            t1 = time.perf_counter()
            walked = walk(root)
            t2 = time.perf_counter()
            times["scan"].append((t1 - t0) * 1000)
            times["walk"].append((t2 - t1) * 1000)
        assert len(scan.mounts) == pods + 1 and walked == pods, (scan, walked)
        print(json.dumps(times))
        return
    victims = {str(volume(root, 1)): True, str(volume(root, 2)): False}

    def statvfs(path: str) -> os.statvfs_result:
        if path in victims:  # torn down right now, in the middle of the scan
            subprocess.run(["umount", path], check=True)
            if victims.pop(path):  # the kubelet unmounts every volume, then removes the pod
                pod = Path(path).parents[2]
                subprocess.run(
                    ["umount", str(pod / "volumes/kubernetes.io~projected/kube-api")], check=True
                )
                shutil.rmtree(pod)
        return os.statvfs(path)

    print(report(NodeScanner(root, statvfs=statvfs, check_device=True).scan()))


if __name__ == "__main__":
    main()

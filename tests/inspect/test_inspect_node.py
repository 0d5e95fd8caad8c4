"""inspect.node over fixture trees laid out as a node keeps them: kubelet pods dir, pod log dirs,
containerd and CRI-O sandbox dirs with their config.json, a mountinfo naming the tmpfs mounts and
a recorded statvfs (statvfs.json)."""

from __future__ import annotations

import json
from pathlib import Path

from shmguard.inspect.node import NodeScanner, PodRef, scan_node
from shmguard.inspect.shm import statvfs_from_json

UID = "0f3a9c1e-5b7d-4e2a-9c8b-1d2e3f4a5b6c"
UID2 = "11111111-2222-3333-4444-555555555555"
CTRD = "a" * 64
CRIO = "b" * 64
EMPTYDIR = f"/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~empty-dir/dshm"
CTRD_SHM = f"/run/containerd/io.containerd.grpc.v1.cri/sandboxes/{CTRD}/shm"
CRIO_SHM = f"/run/containers/storage/overlay-containers/{CRIO}/userdata/shm"
MIB = 1 << 20


class Node:
    """A fixture node under ``root``: mounts are recorded in mountinfo with the ``root`` prefix,
    as the DaemonSet sees the host's mounts below /host."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lines: list[str] = [f"1 0 8:1 / {root} rw,relatime shared:1 - ext4 /dev/sda1 rw"]
        self.statvfs: dict[str, dict[str, int]] = {}

    def mount(self, path: str, fstype: str = "tmpfs", blocks: int = 256, free: int = 256) -> None:
        (self.root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        n = len(self.lines) + 1
        dev = f"0:{40 + n}"
        self.lines.append(f"{n} 1 {dev} / {self.root}{path} rw,nosuid shared:{n} - {fstype} x rw")
        self.statvfs[path] = {
            "f_frsize": 4096,
            "f_blocks": blocks,
            "f_bfree": free,
            "f_bavail": free,
        }

    def file(self, path: str, text: str) -> None:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def scanner(self) -> NodeScanner:
        info = self.root / "mountinfo"
        info.write_text("".join(line + "\n" for line in self.lines))
        (self.root / "statvfs.json").write_text(json.dumps(self.statvfs))
        return NodeScanner(self.root, mountinfo=info, statvfs=statvfs_from_json(self.root))


def config(annotations: dict[str, str]) -> str:
    return json.dumps({"ociVersion": "1.1.0", "annotations": annotations})


def test_memory_emptydir_named_from_the_kubelets_pod_log_dir(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(EMPTYDIR, blocks=512, free=384)  # 2 MiB, 0.5 MiB used
    (tmp_path / f"var/log/pods/training_trainer-0_{UID}/trainer").mkdir(parents=True)
    # a disk-backed emptyDir is a plain directory, no mount: not listed
    (tmp_path / f"var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~empty-dir/cache").mkdir()
    (m,) = node.scanner().scan().mounts
    assert (m.kind, m.path, m.volume, m.sandbox_id) == ("emptydir", EMPTYDIR, "dshm", None)
    assert m.pod == PodRef("training", "trainer-0", UID, f"/var/log/pods/training_trainer-0_{UID}")
    assert (m.size_bytes, m.used_bytes, m.avail_bytes) == (2 * MIB, MIB // 2, 3 * MIB // 2)


def test_containerd_and_crio_sandbox_shm_named_from_their_config_json(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(CTRD_SHM, blocks=16384, free=16000)
    node.file(
        f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{CTRD}/config.json",
        config(
            {
                "io.kubernetes.cri.container-type": "sandbox",
                "io.kubernetes.cri.sandbox-namespace": "ml",
                "io.kubernetes.cri.sandbox-name": "loader-abc",
                "io.kubernetes.cri.sandbox-uid": UID2,
            }
        ),
    )
    node.mount(CRIO_SHM, blocks=16384, free=0)
    node.file(
        f"/run/containers/storage/overlay-containers/{CRIO}/userdata/config.json",
        config(
            {
                "io.kubernetes.pod.namespace": "default",
                "io.kubernetes.pod.name": "web-1",
                "io.kubernetes.pod.uid": UID,
            }
        ),
    )
    ctrd, crio = node.scanner().scan().mounts
    assert (ctrd.kind, ctrd.sandbox_id, ctrd.volume) == ("containerd", CTRD, None)
    assert (ctrd.pod.namespace, ctrd.pod.name, ctrd.pod.uid) == ("ml", "loader-abc", UID2)
    assert ctrd.size_bytes == 64 * MIB and ctrd.used_bytes == 384 * 4096
    assert (crio.kind, crio.path, crio.sandbox_id) == ("cri-o", CRIO_SHM, CRIO)
    assert (crio.pod.namespace, crio.pod.name, crio.pod.uid) == ("default", "web-1", UID)
    assert crio.avail_bytes == 0 and crio.used_bytes == 64 * MIB


def test_no_record_means_unknown_with_the_reason_never_a_guess(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(EMPTYDIR)
    node.mount(CTRD_SHM)
    node.mount(CRIO_SHM)
    node.file(f"/run/containers/storage/overlay-containers/{CRIO}/userdata/config.json", "{")
    node.file(f"/var/log/pods/other_pod_{UID2}/c/0.log", "")  # another pod's, not this one's
    empty, ctrd, crio = node.scanner().scan().mounts
    assert empty.pod == PodRef(None, None, UID, f"no /var/log/pods/<namespace>_<name>_{UID}")
    assert ctrd.pod.namespace is None and ctrd.pod.name is None and ctrd.pod.uid is None
    assert ctrd.pod.source.endswith(f"k8s.io/{CTRD}/config.json: no such file or directory")
    assert crio.pod == PodRef(None, None, None, f"{CRIO_SHM[:-3]}config.json: not JSON")


def test_only_tmpfs_at_the_known_places_below_root(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(EMPTYDIR, fstype="ext4")  # not memory-backed
    node.mount("/dev/shm")  # the node's own /dev/shm: not a pod's
    node.mount(f"/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~secret/token")  # a secret
    node.lines.append(f"99 1 0:99 / /elsewhere{EMPTYDIR} rw - tmpfs tmpfs rw")  # not below root
    scan = node.scanner().scan()
    assert scan.mounts == () and scan.skipped == () and scan.error is None


def test_a_mount_gone_before_statvfs_is_skipped_with_its_reason(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(EMPTYDIR)
    node.mount(CTRD_SHM)
    scanner = node.scanner()
    del node.statvfs[EMPTYDIR]  # recorded statvfs raises FileNotFoundError for it, as statvfs(2)
    (tmp_path / "statvfs.json").write_text(json.dumps(node.statvfs))
    scanner.statvfs = statvfs_from_json(tmp_path)
    scan = scanner.scan()
    assert [m.path for m in scan.mounts] == [CTRD_SHM]
    assert scan.skipped == (f"{EMPTYDIR}: no such file or directory",)


def test_missing_or_garbled_mountinfo_is_an_error_not_an_exception(tmp_path: Path) -> None:
    scan = scan_node(tmp_path, mountinfo=tmp_path / "nope")
    assert scan.mounts == () and scan.error is not None and "No such file" in scan.error
    (tmp_path / "garbled").write_text("1 2 3\n")
    scan = scan_node(tmp_path, mountinfo=tmp_path / "garbled")
    assert scan.error is not None and "line 1: not in proc(5) mountinfo format" in scan.error


def test_sandbox_records_are_cached_and_pruned_with_their_sandbox(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.mount(CTRD_SHM)
    conf = f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{CTRD}/config.json"
    node.file(
        conf,
        config({"io.kubernetes.cri.sandbox-namespace": "a", "io.kubernetes.cri.sandbox-name": "b"}),
    )
    scanner = node.scanner()
    assert scanner.scan().mounts[0].pod == PodRef("a", "b", None, conf)
    (tmp_path / conf.lstrip("/")).unlink()  # read once: a sandbox's config does not change
    assert scanner.scan().mounts[0].pod == PodRef("a", "b", None, conf)
    node.lines.pop()  # the sandbox is gone: its record is dropped with it
    (tmp_path / "mountinfo").write_text("".join(line + "\n" for line in node.lines))
    assert scanner.scan().mounts == ()
    node.lines.append(f"9 1 0:77 / {tmp_path}{CTRD_SHM} rw - tmpfs tmpfs rw")
    (tmp_path / "mountinfo").write_text("".join(line + "\n" for line in node.lines))
    assert scanner.scan().mounts[0].pod.namespace is None  # read again, now missing


def test_unlistable_pod_logs_dir_is_the_reason_and_a_covered_mount_counts_once(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.mount(EMPTYDIR, blocks=100, free=100)
    node.mount(EMPTYDIR, blocks=512, free=256)  # mounted again on top: this one is seen
    (m,) = node.scanner().scan().mounts
    assert (m.size_bytes, m.used_bytes) == (2 * MIB, MIB)
    assert m.pod == PodRef(None, None, UID, "/var/log/pods: no such file or directory")

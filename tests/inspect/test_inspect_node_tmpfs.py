"""inspect.node on real tmpfs mounts laid out as the kubelet and containerd lay them out below a
temp root (node_layout.py, in a private mount namespace so nothing outlives the test): 100
memory-backed emptyDirs and a sandbox /dev/shm, statvfs figures, pods named from the kubelet's
log dirs and the sandbox's config.json, and pods torn down in the middle of the scan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

UNSHARE = ("unshare", "--mount", "--propagation", "private", "--fork")
LAYOUT = Path(__file__).with_name("node_layout.py")
PODS = 100
KIB, MIB = 1024, 1 << 20
pytestmark = pytest.mark.root


def run_layout(root: Path, mode: str = "scan") -> dict[str, Any]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    r = subprocess.run(
        [*UNSHARE, sys.executable, str(LAYOUT), str(root), str(PODS), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_real_tmpfs_pod_volumes_and_sandbox_shm_with_pods_torn_down_mid_scan(
    tmp_path: Path,
) -> None:
    out = run_layout(tmp_path)
    assert out["error"] is None
    mounts = out["mounts"]
    # pod 1 (unmounted and removed) and pod 2 (unmounted, directory left) are not reported as
    # the disk below them
    vol = "/volumes/kubernetes.io~empty-dir/dshm"
    (gone,) = [s for s in out["skipped"] if "00000001-" in s]
    assert gone.endswith(f"{vol}: no such file or directory")
    (unmounted,) = [s for s in out["skipped"] if "00000002-" in s]
    assert unmounted.endswith(f"{vol}: unmounted during the scan")
    emptydirs = [m for m in mounts if m["kind"] == "emptydir"]
    assert len(emptydirs) == PODS - 2
    for m in emptydirs:
        i = int(m["pod"][2][:8], 16)
        assert m["pod"] == [f"ns{i}", f"pod-{i}", m["pod"][2]]
        assert m["path"] == f"/var/lib/kubelet/pods/{m['pod'][2]}{vol}" and m["volume"] == "dshm"
        assert m["size"] == MIB
        # tmpfs counts whole pages: the file's bytes rounded up to 4 KiB
        assert m["used"] == -(-(i % 200) * KIB // 4096) * 4096
        assert m["avail"] == m["size"] - m["used"]
    (shm,) = [m for m in mounts if m["kind"] == "containerd"]
    assert shm["pod"] == ["jobs", "no-volume", f"{9999:08x}-0000-4000-8000-{9999:012x}"]
    assert shm["size"] == 64 * MIB and shm["used"] == 3 * MIB
    with open("/proc/self/mountinfo", encoding="utf-8") as f:  # nothing left mounted here
        assert str(tmp_path) not in f.read()


def test_through_a_read_only_rslave_view_as_the_daemonset_mounts_the_host(tmp_path: Path) -> None:
    out = run_layout(tmp_path, "view")
    assert out["error"] is None and out["skipped"] == []
    mounts = out["mounts"]
    assert len(mounts) == PODS + 2  # every emptyDir, the sandbox /dev/shm, and the late one
    assert all(m["path"].startswith(("/var/lib/kubelet/", "/run/containerd/")) for m in mounts)
    (late,) = [m for m in mounts if m["pod"][0] == "late"]
    # mounted on the node after the view was made: it propagated in (HostToContainer)
    assert late["pod"][1] == "pod-late" and late["size"] == 2 * MIB and late["used"] == 8192
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        assert str(tmp_path) not in f.read()

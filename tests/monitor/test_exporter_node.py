"""The exporter's node mode on real tmpfs mounts laid out as the kubelet and containerd lay
them out (tests/inspect/node_layout.py) in a private mount namespace, scraped over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

CHILD = Path(__file__).with_name("node_child.py")
UNSHARE = ("unshare", "--mount", "--propagation", "private", "--fork")
KIB, MIB = 1024, 1 << 20
pytestmark = pytest.mark.root


def _series(text: str) -> dict[tuple[str, str, str], float]:
    """``{(metric, namespace/pod, kind:volume): value}``."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "kind" in s.labels:
                key = (
                    s.name,
                    f"{s.labels['namespace']}/{s.labels['pod']}",
                    f"{s.labels['kind']}:{s.labels['volume']}",
                )
                out[key] = s.value
            else:
                out[(s.name, "", "")] = s.value
    return out


def test_node_mode_reports_every_pod_volume_named_and_a_spike_between_scrapes(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    r = subprocess.run(
        [*UNSHARE, sys.executable, str(CHILD), str(tmp_path), "6"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    first, second = (_series(t) for t in json.loads(r.stdout))
    assert first[("shmguard_up", "", "")] == 1
    for i in range(6):
        pod = f"ns{i}/pod-{i}"
        assert first[("shmguard_shm_size_bytes", pod, "emptydir:dshm")] == MIB
        # node_layout writes i KiB: tmpfs counts whole 4 KiB pages
        used = first[("shmguard_shm_used_bytes", pod, "emptydir:dshm")]
        assert used == -(-i * KIB // 4096) * 4096
    # the sandbox /dev/shm of a pod without an emptyDir, named from containerd's config.json
    assert first[("shmguard_shm_size_bytes", "jobs/no-volume", "containerd:")] == 64 * MIB
    assert first[("shmguard_shm_used_bytes", "jobs/no-volume", "containerd:")] == 3 * MIB
    # the 512 KiB written and removed between scrapes is in pod 3's peak only
    assert second[("shmguard_shm_used_bytes", "ns3/pod-3", "emptydir:dshm")] == 4096
    assert second[("shmguard_shm_peak_bytes", "ns3/pod-3", "emptydir:dshm")] >= 516 * KIB
    assert second[("shmguard_shm_peak_bytes", "ns5/pod-5", "emptydir:dshm")] == 8192
    # pod 4, torn down, is gone from the scrape without an error
    assert ("shmguard_shm_used_bytes", "ns4/pod-4", "emptydir:dshm") not in second
    assert second[("shmguard_up", "", "")] == 1
    # no service-account token tmpfs (kubernetes.io~projected) is reported
    assert {k[2] for k in second if k[2]} == {"emptydir:dshm", "containerd:"}

"""How long one node scan (inspect.node.NodeScanner.scan) takes with 100 pod volumes as real
tmpfs mounts, against walking the kubelet pods directory.

Lays out, in a private mount namespace (root + unshare), 100 memory-backed emptyDirs as the
kubelet mounts them, each pod's projected service-account token (a tmpfs too, passed by) and one
containerd sandbox /dev/shm (tests/inspect/node_layout.py), then
times 50 rounds of, in the same process:

* ``NodeScanner(root).scan()``: one /proc/self/mountinfo read, statvfs + stat per mount, pod
  names from the pod log dirs and the sandbox's config.json (cached after the first scan);
* the baseline: listing ``pods/*/volumes/kubernetes.io~empty-dir/*``, ``os.path.ismount`` and
  statvfs for each (no pod names, no sandbox /dev/shm).

Prints both medians in ms and their ratio; the target (issue 11) is a scan under 10 ms median.
The mountinfo read grows with every mount on the machine, which the baseline does not pay.
Run: ``python benchmarks/node_scan.py [--pods N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

UNSHARE = ("unshare", "--mount", "--propagation", "private", "--fork")
LAYOUT = Path(__file__).resolve().parent.parent / "tests/inspect/node_layout.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (tmpfs mounts in a private mount namespace)")
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            [*UNSHARE, sys.executable, str(LAYOUT), tmp, str(args.pods), "bench"],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    times = json.loads(r.stdout)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        others = sum(1 for _ in f)
    scan, walk = statistics.median(times["scan"]), statistics.median(times["walk"])
    print(
        f"pod volumes: {args.pods} tmpfs emptyDirs + 1 sandbox /dev/shm "
        f"(+ {args.pods} token tmpfs mounts passed by)"
    )
    print(f"mounts on this machine besides them: {others}")
    print(f"node scan:            median {scan:.3f} ms (min {min(times['scan']):.3f})")
    print(f"walk pods dir (base): median {walk:.3f} ms (min {min(times['walk']):.3f})")
    print(f"ratio scan/walk: {scan / walk:.2f}")


if __name__ == "__main__":
    main()

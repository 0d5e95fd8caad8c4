"""Child of test_recommend_node.py, run as root in a private mount namespace (``unshare
--mount --propagation private --fork``): lays out a node below ROOT as the kubelet and
containerd lay it out, with real tmpfs mounts (tests/inspect/node_layout.py's paths), runs
``shmguard exporter --node-root ROOT`` on 127.0.0.1:PORT in that namespace, and then does what
its standard input asks, one line each, answering ``ok`` on standard output:

* ``fill``: pod 0 of Deployment ``train`` writes a 60 MiB spike for 0.2 s, then holds 20 MiB;
  pod 1 holds 10 MiB; the Deployment ``infer`` pod without a volume holds 56 MiB in the /dev/shm
  containerd gave it.
* ``stop``: SIGTERM to the exporter; answers with its exit status.

``python node_prom_child.py ROOT PORT``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inspect"))
from node_layout import uid, volume

#: (namespace, pod) of the two pods with a memory emptyDir "dshm" (256 MiB).
TRAIN = (("ml", "train-7c9f8b6d5d-x2x4k"), ("ml", "train-7c9f8b6d5d-qz7wp"))
#: The pod without a volume: its /dev/shm is containerd's 64 MiB sandbox tmpfs.
INFER = ("serve", "infer-6d8f7b9c4-kq2lm")
SANDBOX = "5eed" * 16
MIB = 1 << 20


def lay_out(root: Path) -> tuple[list[Path], Path]:
    """Mount the pods' tmpfs volumes and the sandbox /dev/shm; the paths."""
    vols = []
    for i, (ns, pod) in enumerate(TRAIN):
        vol = volume(root, i)
        vol.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(vol)], check=True)
        (root / f"var/log/pods/{ns}_{pod}_{uid(i)}").mkdir(parents=True)
        vols.append(vol)
    shm = root / f"run/containerd/io.containerd.grpc.v1.cri/sandboxes/{SANDBOX}/shm"
    shm.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "shm", str(shm)], check=True)
    bundle = root / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{SANDBOX}"
    bundle.mkdir(parents=True)
    notes = {
        "io.kubernetes.cri.sandbox-namespace": INFER[0],
        "io.kubernetes.cri.sandbox-name": INFER[1],
        "io.kubernetes.cri.sandbox-uid": uid(77),
    }
    (bundle / "config.json").write_text(json.dumps({"annotations": notes}))
    return vols, shm


def main() -> None:
    root, port = Path(sys.argv[1]), sys.argv[2]
    vols, shm = lay_out(root)
    argv = [sys.executable, "-m", "shmguard", "exporter", "--node-root", str(root)]
    argv += ["--listen", f"127.0.0.1:{port}", "--interval", "50ms", "--window", "1m"]
    exporter = subprocess.Popen(argv)
    for line in sys.stdin:
        if line.strip() == "fill":
            (vols[0] / "spike").write_bytes(b"s" * 60 * MIB)
            time.sleep(0.2)
            (vols[0] / "spike").unlink()
            (vols[0] / "keep").write_bytes(b"k" * 20 * MIB)
            (vols[1] / "keep").write_bytes(b"k" * 10 * MIB)
            (shm / "psm_held").write_bytes(b"p" * 56 * MIB)
            print("ok", flush=True)
        elif line.strip() == "stop":
            exporter.terminate()
            print(exporter.wait(30), flush=True)
            return


if __name__ == "__main__":
    main()

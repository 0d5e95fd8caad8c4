"""Child of test_exporter_node.py, run as root in a private mount namespace: lays out a node
with real tmpfs mounts (tests/inspect/node_layout.py) below ROOT, serves the node-mode exporter
on loopback, scrapes it over HTTP, fills one pod's volume between two scrapes and removes
another pod, and prints the scrapes' text as JSON: ``python node_child.py ROOT PODS``. With
``bench N`` after them it prints the milliseconds of N sequential scrapes instead
(benchmarks/monitor_overhead.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inspect"))
from node_layout import lay_out, volume

from shmguard.monitor.exporter import ExporterServer
from shmguard.monitor.node_exporter import NodeCollector


def main() -> None:
    root, pods = Path(sys.argv[1]), int(sys.argv[2])
    lay_out(root, pods)
    bench = sys.argv[3:4] == ["bench"]
    # the bench scans in the background at the CLI's node-mode default (1 s); the test at 20 Hz
    # so the background scans see its spike (a 20 Hz scan thread also slows every scrape: it
    # holds the GIL for ~3.5 ms of each 50)
    collector = NodeCollector(root, interval=1.0 if bench else 0.05, window=60, bucket=1)
    collector.start()
    server = ExporterServer(collector, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.port}/metrics"
    if bench:
        urllib.request.urlopen(url).read()
        times = []
        for _ in range(int(sys.argv[4])):
            t = time.perf_counter()
            urllib.request.urlopen(url).read()
            times.append((time.perf_counter() - t) * 1000)
        server.shutdown()
        print(json.dumps(times))
        return
    scrapes = [urllib.request.urlopen(url).read().decode()]
    # pod 3: 512 KiB written, seen by the background scans, then removed before the scrape
    spike = volume(root, 3) / "spike"
    spike.write_bytes(b"z" * 512 * 1024)
    time.sleep(0.5)
    spike.unlink()
    # pod 4 torn down as the kubelet does (umount, rmdir)
    subprocess.run(["umount", str(volume(root, 4))], check=True)
    volume(root, 4).rmdir()
    scrapes.append(urllib.request.urlopen(url).read().decode())
    server.shutdown()
    print(json.dumps(scrapes))


if __name__ == "__main__":
    main()

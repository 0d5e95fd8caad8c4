"""The exporter's node mode (``shmguard exporter --node-root /host``): every pod's shared
memory on a node, from a DaemonSet.

The mounts come from :class:`shmguard.inspect.node.NodeScanner` (memory-backed emptyDirs and
the containerd / CRI-O sandbox /dev/shm, pods named from the kubelet's and the runtime's own
records; docs/deploy.md). A thread rescans every ``interval`` seconds and keeps each mount's
highest use in a :class:`~shmguard.monitor.peaks.WindowPeak` (entries of mounts gone from the
last scan are dropped, so memory follows the pods on the node); each scrape scans once more.
Series carry the labels ``namespace``, ``pod`` (a pod without a record on the node is named by
its UID or sandbox id), ``container`` (empty: a pod volume belongs to the pod), ``kind``
(``emptydir``, ``containerd``, ``cri-o``) and ``volume`` (the emptyDir's name, empty for a
sandbox /dev/shm), so the alert rules and the dashboard work on both modes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shmguard._version import __version__
from shmguard.inspect.node import NodeScan, NodeScanner, NodeShmMount
from shmguard.monitor.peaks import WindowPeak

#: Label names of node-mode series, in order.
NODE_LABELS = ("namespace", "pod", "container", "kind", "volume")


def _labels(m: NodeShmMount) -> list[str]:
    """The label values of one mount; a pod the node keeps no record of is named by its UID
    or sandbox id (else its path), so two unnamed pods never share a series."""
    pod = m.pod.name or m.pod.uid or m.sandbox_id or m.path
    return [m.pod.namespace or "", pod, "", m.kind, m.volume or ""]


class NodeCollector:
    """A prometheus-client custom collector over a node's pod shm mounts.

    Args:
        root: where the node's ``/`` is seen (``/host`` in the DaemonSet).
        interval: seconds between background scans for the peaks (> 0).
        window: seconds ``shmguard_shm_peak_bytes`` looks back.
        bucket: seconds per peak bucket.
        scanner: a scanner to use (tests); default ``NodeScanner(root)``.
    """

    def __init__(
        self,
        root: Path,
        interval: float = 1.0,
        window: float = 300.0,
        bucket: float = 10.0,
        scanner: NodeScanner | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.root = root
        self.interval = interval
        self.window = window
        self.bucket = bucket
        self.scanner = scanner or NodeScanner(root)
        self._peaks: dict[str, WindowPeak] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the background scans."""
        self._scan()
        self._thread = threading.Thread(target=self._loop, name="shm-node-exporter", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the background scans (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._scan()

    def _scan(self) -> NodeScan:
        scan = self.scanner.scan()
        now = time.monotonic()
        with self._lock:
            if scan.error is None:
                live = {m.path for m in scan.mounts}
                self._peaks = {p: w for p, w in self._peaks.items() if p in live}
            for m in scan.mounts:
                peak = self._peaks.get(m.path)
                if peak is None:
                    peak = self._peaks[m.path] = WindowPeak(self.window, self.bucket)
                peak.add(m.used_bytes, now)
        return scan

    def collect(self) -> Iterator[Any]:
        """Scan now and yield the metric families; never raises (an unreadable mountinfo
        gives ``shmguard_up 0``)."""
        from prometheus_client.core import GaugeMetricFamily

        scan = self._scan()
        info = GaugeMetricFamily(
            "shmguard_info",
            "shmguard exporter version and the node root it reads",
            labels=["version", "path"],
        )
        info.add_metric([__version__, str(self.root)], 1)
        yield info
        up = GaugeMetricFamily("shmguard_up", "1 when the node's mounts could be read")
        up.add_metric([], 0 if scan.error is not None else 1)
        yield up
        labels = list(NODE_LABELS)
        families = {
            "size": GaugeMetricFamily(
                "shmguard_shm_size_bytes", "Size of the pod's tmpfs (statvfs)", labels=labels
            ),
            "used": GaugeMetricFamily(
                "shmguard_shm_used_bytes", "Used bytes of the pod's tmpfs", labels=labels
            ),
            "avail": GaugeMetricFamily(
                "shmguard_shm_avail_bytes", "Bytes still available", labels=labels
            ),
            "peak": GaugeMetricFamily(
                "shmguard_shm_peak_bytes",
                f"Highest used bytes over the last {self.window:g} s (scanned every "
                f"{self.interval:g} s and at each scrape)",
                labels=labels,
            ),
        }
        with self._lock:
            for m in scan.mounts:
                values = _labels(m)
                families["size"].add_metric(values, m.size_bytes)
                families["used"].add_metric(values, m.used_bytes)
                families["avail"].add_metric(values, m.avail_bytes)
                window = self._peaks.get(m.path)
                peak = window.peak() if window is not None else None
                families["peak"].add_metric(values, max(peak or 0, m.used_bytes))
        yield from families.values()

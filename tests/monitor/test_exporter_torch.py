"""A real PyTorch DataLoader that hangs on a full /dev/shm (shmguard.examples.hang_loader,
torch_shm.md scenario S09) in a sandbox with a private 64 MiB tmpfs: the exporter watching it
reports it as stalled."""

from __future__ import annotations

import sys
import time

import pytest
from monitor_helpers import MiB, value, wait_for

from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.monitor.exporter import ExporterOptions, ShmCollector, labels_from_env

pytestmark = [pytest.mark.torch, pytest.mark.slow, pytest.mark.root]


def test_hanging_dataloader_is_reported_stalled_within_30_s(root_only: None) -> None:
    pytest.importorskip("torch")
    spec = SandboxSpec(
        (sys.executable, "-m", "shmguard.examples.hang_loader", "--items", "40"), 64 * MiB
    )
    with Sandbox(spec, output="capture") as box:
        box.start(hold=True)
        assert box.init_pid is not None
        collector = ShmCollector(
            ExporterOptions(
                shm_path=str(box.shm_path),
                pid=box.init_pid,
                stall_after=10.0,
                window=60,
                bucket=1,
                labels=labels_from_env({}),
            )
        )
        collector.start()
        try:
            box.release()
            t0 = time.monotonic()
            stalled = wait_for(lambda: value(collector, "shmguard_stalled") == 1, 60, 1.0)
            took = time.monotonic() - t0
            assert stalled, "not reported as stalled within 60 s"
            assert took < 30, took
            assert box.proc is not None and box.proc.poll() is None  # still hung, not dead
            assert (value(collector, "shmguard_shm_failed_allocations_total") or 0) >= 1
            assert (value(collector, "shmguard_shm_owner_bytes", owner="torch") or 0) > 0
        finally:
            collector.close()

"""The watch renderers: the sparkline, the plain lines, the live view and the JSON body, from
a snapshot of a real 16 MiB tmpfs (a sandbox's /dev/shm) holding a 12 MiB psm_ file."""

from __future__ import annotations

import io
import sys
import time

import pytest
from rich.console import Console

from schema_registry import validator
from shmguard.measure.sampler import shm_usage
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.monitor.target import resolve_target
from shmguard.monitor.watch import Monitor, WatchSnapshot
from shmguard.render.json import envelope
from shmguard.render.json_bodies import watch_body as watch_data
from shmguard.render.watch_text import sparkline, summary_lines, watch_view
from shmguard.units import MiB

FILL = (
    "import time\n"
    "with open('/dev/shm/psm_1', 'wb') as fh:\n"
    "    fh.write(b'x' * (12 << 20))\n"
    "time.sleep(30)\n"
)


def test_sparkline_scales_to_the_size() -> None:
    assert sparkline((), 100) == ""
    assert sparkline((0, 50, 100), 100) == "▁▅█"
    assert sparkline((0, 7, 14), 0) == "▁▅█"  # no size: the highest value is the top
    assert sparkline((200,), 100) == "█"  # clipped, not an error


@pytest.fixture
def snapshot(root_only: None) -> WatchSnapshot:
    spec = SandboxSpec((sys.executable, "-c", FILL), 16 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start()
        deadline = time.monotonic() + 30
        while shm_usage(box.shm_path)[0] < 12 * MiB and time.monotonic() < deadline:
            time.sleep(0.05)
        assert box.pid is not None
        with Monitor(resolve_target(pid=box.pid), threshold=0.5) as monitor:
            time.sleep(0.2)
            snap = monitor.snapshot()
        box.kill("test over")
        box.wait(timeout=30)
    return snap


@pytest.mark.root
def test_views_of_a_real_snapshot(snapshot: WatchSnapshot) -> None:
    assert (snapshot.total, snapshot.used, snapshot.free) == (16 * MiB, 12 * MiB, 4 * MiB)
    assert snapshot.alert and not snapshot.stalled  # 75% >= 50%
    lines = summary_lines(snapshot)
    assert "size 16 MiB, used 12 MiB (75%), free 4 MiB, peak 12 MiB" in lines[0]
    assert lines[1].startswith(
        "owners: torch 0 B, nccl 0 B, psm 12 MiB, plasma 0 B, semaphore 0 B, other 0 B"
    )
    assert lines[-1] == "ALERT: /dev/shm reached 12 MiB, at least 50% of 16 MiB"
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(watch_view(snapshot))
    text = out.getvalue()
    assert "12 MiB (75%)" in text and "owner psm" in text and "cgroup shmem" in text
    assert "▆" in text  # the sparkline: one refresh at 12 of 16 MiB
    data = envelope("watch", watch_data(snapshot))
    validator("watch").validate(data)
    assert data["history"] == [12 * MiB]
    assert data["owners"]["psm"] == 12 * MiB

"""The sampler as a long-running watcher: nothing process-wide changes, a bounded ring of
change points, typed live readings; against a real private tmpfs."""

from __future__ import annotations

import itertools
import sys
import time

import pytest

from shmguard.measure.sampler import ShmSampler
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.measure.timeline import Reading
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

# 40 distinct levels, 20 ms apart: 1..40 MiB written one MiB at a time into one file.
STEPS = """
import time
with open("/dev/shm/grow", "wb") as fh:
    for _ in range(40):
        fh.write(b"x" * (1 << 20)); fh.flush(); time.sleep(0.02)
time.sleep(0.3)
"""


def test_watcher_changes_nothing_process_wide_and_keeps_a_ring(
    root_only: None, no_leftovers: None
) -> None:
    switch = sys.getswitchinterval()
    with Sandbox(SandboxSpec((sys.executable, "-c", STEPS), 64 * MiB), output="capture") as box:
        box.start()
        sampler = ShmSampler.watcher(box.shm_path, interval=0.005, max_points=10)
        sampler.start()
        assert sys.getswitchinterval() == switch
        time.sleep(0.2)
        live = sampler.reading()
        result = box.wait(timeout=30)
        recent = sampler.recent(60.0)
        tl = sampler.stop()
    assert result.exit_status == 0, result.stderr_tail
    assert sys.getswitchinterval() == switch
    assert tl.realtime is False
    assert isinstance(live, Reading)
    assert live.total == 64 * MiB and 0 < live.used <= 40 * MiB
    assert live.used_fraction == live.used / (64 * MiB)
    assert live.free == 64 * MiB - live.used
    # The ring holds the last 10 change points (plus the closing poll) and counts the others.
    assert tl.peak == 40 * MiB
    assert len(tl.samples) <= 11
    assert tl.samples[-1][1] == 40 * MiB
    assert tl.dropped_points >= 40 - 10
    assert tl.dropped_points + len(tl.samples) >= 41
    assert [u for _, u in recent] == [u for _, u in tl.samples][: len(recent)]
    levels = [u for _, u in tl.samples]
    assert levels == sorted(levels)


def test_measuring_sampler_keeps_the_first_points(root_only: None, no_leftovers: None) -> None:
    with Sandbox(SandboxSpec((sys.executable, "-c", STEPS), 64 * MiB), output="capture") as box:
        box.start()
        sampler = ShmSampler(box.shm_path, interval=0.005, max_points=5)
        sampler.start()
        box.wait(timeout=30)
        tl = sampler.stop()
    assert tl.samples[0] == (0.0, 0)
    assert len(tl.samples) <= 6  # five kept plus the closing poll
    assert tl.dropped_points >= 40 - 5 + 1
    assert tl.peak == 40 * MiB  # the peak does not depend on the points kept


def test_recent_returns_the_window_and_the_point_in_force() -> None:
    sampler = ShmSampler.watcher("/dev/shm", interval=0.01)
    sampler.start()
    try:
        time.sleep(0.05)
        points = sampler.recent(0.01)
        used = sampler.used
    finally:
        sampler.cancel(wait=1.0)
    # The point in force at the window's start is included, so the window is never empty.
    assert points and points[-1][1] == used
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(points))


def test_too_small_a_ring_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_points"):
        ShmSampler("/dev/shm", max_points=1)

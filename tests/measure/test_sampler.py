"""The sampler against real tmpfs use with known sizes, and owner attribution."""

from __future__ import annotations

import sys

import pytest

from shmguard.measure.sampler import EVENT_POLLS, ShmSampler, Timeline, shm_usage
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

# Holds an *unlinked* 4 MiB torch-named file open (PyTorch's file_descriptor strategy does the
# same), plus a named 1 MiB psm_ file, for 0.6 s.
HOLDER = """
import os, time
fd = os.open("/dev/shm/torch_1_2_3", os.O_RDWR | os.O_CREAT, 0o600)
os.posix_fallocate(fd, 0, 4 << 20)
os.unlink("/dev/shm/torch_1_2_3")
with open("/dev/shm/psm_abcdef", "wb") as fh:
    fh.write(b"x" * (1 << 20))
print("holding", flush=True)
time.sleep(0.6)
"""


def _sampled(spec: SandboxSpec, **kw: object) -> Timeline:
    with Sandbox(spec, output="capture") as box:
        box.start()
        sampler = ShmSampler(box.shm_path, pids=box.tree_pids, **kw)  # type: ignore[arg-type]
        sampler.start()
        result = box.wait(timeout=30)
        timeline = sampler.stop()
    assert result.exit_status == 0, result.stderr_tail
    return timeline


def test_peak_and_timeline_are_exact(root_only: None, no_leftovers: None) -> None:
    script = (
        "sleep 0.2; head -c 3145728 /dev/zero > /dev/shm/a; sleep 0.3; "
        "head -c 2097152 /dev/zero > /dev/shm/b; sleep 0.3; rm /dev/shm/a; sleep 0.3"
    )
    tl = _sampled(SandboxSpec(("sh", "-c", script), 16 * MiB), interval=0.002)
    assert tl.shm_total == 16 * MiB
    assert tl.baseline == 0
    assert tl.peak == 5 * MiB
    levels = [u for _, u in tl.samples]
    assert 3 * MiB in levels and 2 * MiB in levels
    assert levels[-1] == 2 * MiB  # b is still there when the sandbox ends
    assert 0.45 < tl.peak_t < 1.2
    assert 0 < tl.max_step() <= 3 * MiB  # a write in progress may be seen part-way
    assert tl.n_samples > 200
    assert tl.errors == ()


def test_owner_attribution_sees_unlinked_files(root_only: None, no_leftovers: None) -> None:
    tl = _sampled(
        SandboxSpec((sys.executable, "-c", HOLDER), 16 * MiB), interval=0.005, owner_interval=0.05
    )
    assert tl.peak == 5 * MiB
    snap = tl.owners_at_peak()
    assert snap is not None
    assert snap.shm_used == 5 * MiB
    assert snap.by_kind["torch"] == 4 * MiB  # unlinked, found through /proc/<pid>/fd
    assert snap.by_kind["psm"] == 1 * MiB  # named and closed: found by listing /dev/shm
    assert snap.held_bytes == 5 * MiB
    assert snap.processes >= 1
    assert snap.rss > 0
    assert tl.rss_peak is not None and tl.rss_peak >= snap.rss


def test_shm_usage_matches_statvfs() -> None:
    used, total = shm_usage("/dev/shm")
    assert 0 <= used <= total


def test_bad_intervals_are_rejected() -> None:
    with pytest.raises(ValueError):
        ShmSampler("/dev/shm", interval=0)


def test_a_watcher_on_the_host_path_stops_cleanly() -> None:
    sampler = ShmSampler("/dev/shm", interval=0.01)
    sampler.start()
    tl = sampler.stop()
    assert tl.path == "/dev/shm"
    assert tl.n_samples >= 1
    assert tl.owners == ()


def test_an_allocation_freed_within_one_interval_is_seen(
    root_only: None, no_leftovers: None
) -> None:
    # With a 0.5 s clock the polls alone would almost never land inside the few milliseconds
    # the file exists; the inotify event after fallocate triggers a poll that does.
    script = "sleep 0.1; fallocate -l 8M /dev/shm/x; rm /dev/shm/x; sleep 0.1"
    for _ in range(3):
        tl = _sampled(SandboxSpec(("sh", "-c", script), 16 * MiB), interval=0.5)
        assert tl.peak == 8 * MiB
        assert tl.n_samples < 10  # the clock alone polled only a few times


def test_a_stream_of_writes_does_not_turn_into_a_busy_poll(
    root_only: None, no_leftovers: None
) -> None:
    # 4 KiB writes for ~0.3 s: thousands of IN_MODIFY events, at most EVENT_POLLS extra polls
    # per 50 ms interval.
    script = "head -c 12M /dev/zero | dd of=/dev/shm/x bs=4k status=none; sleep 0.05"
    tl = _sampled(SandboxSpec(("sh", "-c", script), 16 * MiB), interval=0.05)
    assert tl.peak == 12 * MiB
    end = tl.samples[-1][0]
    assert tl.n_samples <= (end / 0.05 + 2) * (EVENT_POLLS + 1)


def _last_write(hold: bool) -> Timeline:
    # A 2 s clock and no inotify: the command writes 8 MiB and ends (and its mount namespace
    # with it) long before the fast loop's next poll, as on a loaded machine where the loop is
    # not scheduled between the last write and the end.
    spec = SandboxSpec(("sh", "-c", "head -c 8388608 /dev/zero > /dev/shm/x"), 16 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start(hold=True)
        sampler = ShmSampler(box.shm_path, interval=2.0, events=False, realtime=False, hold=hold)
        sampler.start()
        box.release()
        result = box.wait(timeout=30)
        timeline = sampler.stop()
    assert result.exit_status == 0, result.stderr_tail
    return timeline


def test_hold_sees_what_the_command_left_when_it_ended(root_only: None, no_leftovers: None) -> None:
    tl = _last_write(hold=True)
    assert tl.peak == 8 * MiB
    assert tl.samples[-1][1] == 8 * MiB
    assert tl.errors == ()

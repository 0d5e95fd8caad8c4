"""The one stall observer (shmguard.measure.stall): the progress test at its edges, the
failed-block baseline, and the process tree's CPU time read from a real child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmguard.measure.stall import (
    CPU_SHARE,
    CPU_SLACK,
    StallObserver,
    TreeCpu,
    cpu_progressed,
)

MiB = 1 << 20
#: A child that burns 0.4 s of CPU, says so, then idles.
_BURN = (
    "import time\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.4: pass\n"
    "print('done', flush=True)\n"
    "time.sleep(30)\n"
)


def test_progress_is_strictly_more_than_five_percent_of_a_core_plus_the_slack() -> None:
    assert (CPU_SHARE, CPU_SLACK) == (0.05, 0.05)
    # over 10 s the threshold is 0.05 * 10 + 0.05 = 0.55 CPU seconds
    limit = CPU_SHARE * 10.0 + CPU_SLACK
    assert not cpu_progressed(0.0, limit, 10.0)  # exactly at the threshold: flat
    assert cpu_progressed(0.0, limit + 1e-9, 10.0)
    assert cpu_progressed(1.0, 1.56, 10.0)
    assert not cpu_progressed(1.0, 1.54, 10.0)
    # over no time at all only the slack is allowed
    assert not cpu_progressed(0.0, 0.05, 0.0)
    assert cpu_progressed(0.0, 0.06, 0.0)
    # a CPU sum that fell (a process left the tree) is never progress
    assert not cpu_progressed(5.0, 1.0, 1.0)


def test_cpu_flat_counts_from_the_mark_and_moves_it_on_progress() -> None:
    obs = StallObserver("/nonexistent/shm")
    assert obs.cpu_flat(100.0, 3.0) is None  # the first call sets the mark
    assert obs.cpu_flat(100.0, 3.0) == 0.0
    assert obs.cpu_flat(104.0, 3.2) == 4.0  # 0.2 <= 0.05 * 4 + 0.05 = 0.25
    # slow growth adds up against the mark: 0.31 > 0.05 * 5 + 0.05 = 0.30
    assert obs.cpu_flat(105.0, 3.31) is None
    assert obs.cpu_flat(107.0, 3.35) == 2.0  # counted from the moved mark
    obs.reset_cpu()
    assert obs.cpu_flat(200.0, 3.35) is None


def test_cpu_stepped_compares_each_call_with_the_previous_one() -> None:
    obs = StallObserver("/nonexistent/shm")
    assert not obs.cpu_stepped(100.0, 3.0)  # nothing to compare with yet
    assert not obs.cpu_stepped(101.0, 3.08)  # 0.08 <= 0.05 * 1 + 0.05
    # the mark moved at the previous call: 0.08 again is flat, though 0.16 since the first
    assert not obs.cpu_stepped(102.0, 3.16)
    assert obs.cpu_stepped(103.0, 3.3)  # 0.14 > 0.10


def _failed(path: Path, name: str, size: int) -> None:
    # what a failed PyTorch allocation leaves: a size (the request) and no blocks
    (path / name).write_bytes(b"")
    os.truncate(path / name, size)


def test_failed_blocks_there_at_the_baseline_do_not_count(tmp_path: Path) -> None:
    _failed(tmp_path, "torch_7_1_0", 32 * MiB)
    (tmp_path / "torch_7_2_0").write_bytes(b"x" * 4096)  # a real block: not a failure
    attached = StallObserver(tmp_path)  # no baseline: every failed allocation counts
    assert attached.failed() == (("torch_7_1_0", 32 * MiB),)
    obs = StallObserver(str(tmp_path))
    assert obs.take_baseline() == frozenset({"torch_7_1_0"})
    assert obs.failed() == ()
    _failed(tmp_path, "torch_8_1_0", 24 * MiB)
    _failed(tmp_path, "other_8_1_0", 24 * MiB)  # not PyTorch's
    # a later baseline call keeps the first names
    assert obs.take_baseline() == frozenset({"torch_7_1_0"})
    assert obs.failed() == (("torch_8_1_0", 24 * MiB),)
    (tmp_path / "torch_8_1_0").unlink()
    assert obs.failed() == ()
    assert StallObserver(tmp_path / "gone").failed() == ()


def test_tree_cpu_adds_a_child_and_keeps_its_time_after_it_exits() -> None:
    pytest.importorskip("psutil")
    tree = TreeCpu()
    me = os.getpid()
    child = subprocess.Popen(
        [sys.executable, "-c", _BURN],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"done\n"  # the child burnt 0.4 s of CPU
        alone = TreeCpu().read([me])
        both = tree.read([me, child.pid])
        assert both - alone >= 0.35
        assert TreeCpu().read([child.pid]) >= 0.35
    finally:
        child.kill()
        child.wait()
    # gone from the tree (and from the system): its time still counts
    after = tree.read([me, child.pid])
    assert after >= both
    assert tree.read([me]) >= both
    # a pid that does not exist is skipped (4194305: above the largest pid_max)
    assert TreeCpu().read([4194305]) == 0.0


def test_tree_cpu_add_keeps_an_exited_process_time() -> None:
    tree = TreeCpu()
    assert tree.add({1: 2.0, 2: 3.0}) == 5.0
    assert tree.add({1: 2.5}) == 5.5  # pid 2 left with 3.0
    assert tree.add({1: 2.5, 3: 1.0}) == 6.5
    assert tree.add({}) == 6.5

"""The one stall verdict on observations, and the zero-block torch_* evidence on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shmguard.triage.stall import ShmObservation, failed_torch_blocks, stall_verdict
from shmguard.units import MiB

TOTAL = 64 * MiB


def test_a_full_shm_with_a_failed_allocation_and_no_progress_is_a_stall() -> None:
    obs = ShmObservation(TOTAL - MiB, TOTAL, TOTAL - MiB, 18 * MiB, alloc_failed=True, quiet=12)
    v = stall_verdict(obs, after=10)
    assert v.stalled and v.full
    assert v.evidence[0] == "/dev/shm 63 MiB of 64 MiB used (1 MiB free, peak 63 MiB)"
    assert "failed shared-memory allocation" in v.reason
    assert "no progress for 12 s" in v.evidence[-1]


def test_progress_within_the_window_is_not_a_stall() -> None:
    obs = ShmObservation(TOTAL - MiB, TOTAL, TOTAL - MiB, 18 * MiB, alloc_failed=True, quiet=3)
    v = stall_verdict(obs, after=10)
    assert v.full and not v.stalled


def test_near_full_without_a_failed_allocation_is_only_busy() -> None:
    # A job that fallocates most of /dev/shm and sleeps is not stuck.
    obs = ShmObservation(TOTAL - 2 * MiB, TOTAL, TOTAL - 2 * MiB, 18 * MiB, quiet=100)
    v = stall_verdict(obs, after=10)
    assert obs.near_full and not v.full and not v.stalled


def test_no_free_page_is_full_on_its_own() -> None:
    obs = ShmObservation(TOTAL, TOTAL, TOTAL, quiet=30)
    assert stall_verdict(obs, after=10).stalled


def test_zero_block_files_count_as_failed_allocations() -> None:
    obs = ShmObservation(TOTAL - MiB, TOTAL, TOTAL, 4 * MiB, failed_blocks=3, quiet=30)
    v = stall_verdict(obs, after=10)
    assert v.stalled
    assert "3 zero-block torch_* file(s)" in v.reason


def test_plenty_of_room_says_so() -> None:
    v = stall_verdict(ShmObservation(MiB, TOTAL, 2 * MiB, quiet=1000), after=1)
    assert not v.full and not v.stalled
    assert v.reason == "no sign of a /dev/shm stall"
    assert not stall_verdict(ShmObservation(0, 0, 0, quiet=99), after=1).full


def test_negative_window_is_rejected() -> None:
    with pytest.raises(ValueError):
        stall_verdict(ShmObservation(0, TOTAL, 0), after=-1)


def test_failed_blocks_are_sized_but_unallocated_torch_files(tmp_path: Path) -> None:
    (tmp_path / "torch_1_2_3").touch()
    os.truncate(tmp_path / "torch_1_2_3", 18 * MiB)  # what a failed posix_fallocate leaves
    (tmp_path / "torch_1_2_4").write_bytes(b"x" * 8192)  # a real block
    (tmp_path / "torch_1_2_5").touch()  # empty
    sparse = tmp_path / "other"
    sparse.touch()
    os.truncate(sparse, MiB)
    assert failed_torch_blocks(tmp_path) == {"torch_1_2_3"}
    assert failed_torch_blocks(tmp_path / "missing") == frozenset()

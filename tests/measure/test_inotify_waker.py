"""The inotify waker on a plain directory: an event wakes it, silence times out."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from shmguard.measure._inotify import open_waker


def test_a_write_wakes_the_waker_and_the_queue_is_drained(tmp_path: Path) -> None:
    waker = open_waker(str(tmp_path))
    assert waker is not None
    try:
        (tmp_path / "a").write_bytes(b"x" * 4096)
        assert waker.wait(1.0) is True
        started = time.monotonic()
        assert waker.wait(0.05) is False  # drained: nothing left to report
        assert time.monotonic() - started >= 0.04
    finally:
        waker.close()
        waker.close()  # idempotent
    assert waker.fd == -1


def test_a_write_from_another_thread_ends_the_wait_early(tmp_path: Path) -> None:
    waker = open_waker(str(tmp_path))
    assert waker is not None
    timer = threading.Timer(0.05, lambda: os.truncate(tmp_path / "b", 1 << 20))
    (tmp_path / "b").touch()
    waker.wait(0.0)  # the touch's close event
    started = time.monotonic()
    timer.start()
    try:
        assert waker.wait(5.0) is True
        assert time.monotonic() - started < 2.0
    finally:
        timer.join()
        waker.close()


def test_no_waker_for_a_missing_directory(tmp_path: Path) -> None:
    assert open_waker(str(tmp_path / "missing")) is None


def test_wake_ends_a_wait_with_no_event_and_is_a_no_op_once_closed(tmp_path: Path) -> None:
    # What cancel() uses so a stopped sampler need not sit out its interval. Without the wake
    # this wait would return False after 30 s.
    waker = open_waker(str(tmp_path))
    assert waker is not None
    threading.Timer(0.05, waker.wake).start()
    assert waker.wait(30.0) is True
    waker.close()
    waker.wake()  # no descriptor is written to after close

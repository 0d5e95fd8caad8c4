"""The trailing-window peak: bounded, and the same answer for every reader."""

from __future__ import annotations

import pytest

from shmguard.monitor.peaks import WindowPeak


def test_peak_is_the_maximum_over_the_window_then_forgets_it() -> None:
    w = WindowPeak(window=60, bucket=10, clock=lambda: 0.0)
    w.add(5, t=1.0)
    w.add(90, t=12.0)  # the spike
    w.add(7, t=25.0)
    assert w.peak(t=30.0) == 90
    assert w.peak(t=30.0) == 90  # reading does not reset it (a second scraper sees it too)
    assert w.peak(t=69.0) == 90  # bucket [10, 20) still overlaps (9, 69]
    assert w.peak(t=80.5) == 7  # the spike's bucket ended at 20 <= 80.5 - 60
    assert w.peak(t=200.0) is None


def test_memory_is_bounded_by_the_number_of_buckets() -> None:
    w = WindowPeak(window=300, bucket=10)
    for i in range(100_000):
        w.add(i, t=i * 0.5)
    assert len(w) == 31
    assert w.peak(t=100_000 * 0.5) == 99_999


def test_late_value_counts_in_the_newest_bucket() -> None:
    w = WindowPeak(window=60, bucket=10)
    w.add(1, t=35.0)
    w.add(50, t=15.0)  # a sampler generation that ended late reports an older time
    assert w.peak(t=40.0) == 50


@pytest.mark.parametrize(("window", "bucket"), [(0, 1), (10, 0), (10, 20), (-1, -1)])
def test_bad_window_or_bucket_is_refused(window: float, bucket: float) -> None:
    with pytest.raises(ValueError, match="bucket"):
        WindowPeak(window=window, bucket=bucket)

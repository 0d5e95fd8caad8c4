"""The exporter's trailing-window peak: a bounded ring of ``(bucket start, max)`` buckets.

A peak that resets on every scrape would show a spike to one Prometheus server only (the one
that scraped first); a maximum over a fixed trailing window is the same for every scraper.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable


class WindowPeak:
    """The highest value seen over the last ``window`` seconds, in ``bucket``-second buckets.

    Memory is bounded: at most ``ceil(window / bucket) + 1`` buckets are kept. The answer
    covers between ``window`` and ``window + bucket`` seconds (a bucket counts while any part
    of it lies in the window).

    Args:
        window: seconds the peak looks back (> 0).
        bucket: seconds per bucket (> 0, at most ``window``).
        clock: monotonic time source in seconds (tests pass their own).

    Raises:
        ValueError: for a non-positive window or bucket, or a bucket longer than the window.
    """

    def __init__(
        self,
        window: float = 300.0,
        bucket: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (window > 0 and 0 < bucket <= window):
            raise ValueError(f"need 0 < bucket <= window, got bucket={bucket} window={window}")
        self.window = window
        self.bucket = bucket
        self.clock = clock
        self._ring: deque[tuple[float, int]] = deque(maxlen=math.ceil(window / bucket) + 1)

    def add(self, value: int, t: float | None = None) -> None:
        """Record ``value`` (bytes) seen at time ``t`` (default now)."""
        now = self.clock() if t is None else t
        start = math.floor(now / self.bucket) * self.bucket
        if self._ring and self._ring[-1][0] == start:
            if value > self._ring[-1][1]:
                self._ring[-1] = (start, value)
        elif not self._ring or start > self._ring[-1][0]:
            self._ring.append((start, value))
        else:  # late value for an older bucket: fold it into the newest one still open
            last_start, last = self._ring[-1]
            self._ring[-1] = (last_start, max(last, value))

    def peak(self, t: float | None = None) -> int | None:
        """The maximum over buckets ending after ``t - window`` (default now), or None when
        nothing lies in the window."""
        now = self.clock() if t is None else t
        since = now - self.window
        values = [v for start, v in self._ring if start + self.bucket > since]
        return max(values) if values else None

    def __len__(self) -> int:
        return len(self._ring)

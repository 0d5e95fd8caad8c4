"""One collection for scrapes that come at once.

Each scrape of the exporter samples /dev/shm, walks /proc for the owners and reads the memory
cgroup: ~10 ms of one core in Python, under the GIL. Twenty scrapers at once (several
Prometheus replicas, a federation, a dashboard refreshing) would run twenty of those side by
side, each then taking about twenty times as long (issue 24: p50 456 ms, p99 750 ms).
:class:`SharedCollect` runs one collection at a time: a scrape that arrives while one is
running waits for it and gets its metric families (the same instant's values, which is what
it asked for), and the next scrape after it ends starts a fresh one. Scrapes one after
another are unchanged: each gets its own collection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Protocol


class _Collects(Protocol):
    def collect(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.families: list[Any] = []
        self.error: BaseException | None = None


class SharedCollect:
    """``collector`` (prometheus-client's custom collector protocol, with ``close``) with
    concurrent :meth:`collect` calls sharing one collection.

    Attributes:
        collections: collections run.
        joined: scrapes that got a running collection's families instead of their own.
    """

    def __init__(self, collector: _Collects, wait: float = 30.0) -> None:
        self.collector = collector
        self._wait = wait
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        self.collections = 0
        self.joined = 0

    def collect(self) -> Iterator[Any]:
        """The metric families of the collection running now, or of a new one."""
        with self._lock:
            flight, lead = self._flight, self._flight is None
            if flight is None:
                flight = self._flight = _Flight()
                self.collections += 1
            else:
                self.joined += 1
        if lead:
            try:
                flight.families = list(self.collector.collect())
            except BaseException as err:  # the followers see it too
                flight.error = err
                raise
            finally:
                with self._lock:
                    self._flight = None
                flight.done.set()
        elif not flight.done.wait(self._wait):
            raise TimeoutError("the collection in progress did not finish")
        if flight.error is not None:
            raise flight.error
        return iter(flight.families)

    def close(self) -> None:
        """Close the wrapped collector."""
        self.collector.close()

"""Pausing Python's cyclic garbage collector while a file is loaded and checked.

Loading a file builds one object graph (PyYAML's nodes and marks, the views over them, the
sources and units) that stays reachable until the caller drops the result, and the sources
layer makes no reference cycles (:mod:`~shmguard.sources.yamlnode`,
:class:`~shmguard.sources.compose.ComposeService`), so reference counting frees all of it
then. The collections that the allocations trigger meanwhile find nothing to free; each
scans the young objects, and each full one the whole growing graph again. Measured over
../shared/corpus on the development machine: about a quarter of ``check``'s time went to them
(20-27 %: the library with and without :func:`gc.disable`, and ``gc.callbacks`` timings).

Use ``pause()`` then ``try: ... finally: resume()``: the collector is disabled while one or
more pauses run (in any thread) and enabled again when the last ends, if it was enabled when
the first began (an application that disabled it keeps it disabled). ``pause`` allocates no
object the collector tracks (a ``with`` statement would: the bound ``__exit__``), so entering
cannot itself trigger the collection it avoids. Cycles made meanwhile, elsewhere in the
process, are collected by the first collection after the pauses end; so that pauses
overlapping without end (threads checking files all the time) cannot defer them for ever, a
pause that ends while others still run lets the collector run once every
:data:`MAX_DEFERRED` such ends.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["MAX_DEFERRED", "pause", "resume"]

#: Ends of pauses, while others still ran, after which the collector runs anyway.
MAX_DEFERRED = 64

_lock = threading.Lock()
#: [pauses running, whether the collector was enabled when the first began, deferred ends]
_state: list[int] = [0, 0, 0]


def pause() -> None:
    """Start a pause (the collector is disabled until the matching :func:`resume`)."""
    _lock.acquire()
    try:
        if _state[0] == 0:
            _state[1] = gc.isenabled()
            gc.disable()
        _state[0] += 1
    finally:
        _lock.release()


def resume() -> None:
    """End a pause started by :func:`pause`."""
    collect = False
    _lock.acquire()
    try:
        _state[0] -= 1
        if _state[0] == 0:
            _state[2] = 0
            if _state[1]:
                gc.enable()
        elif _state[1]:
            _state[2] += 1
            if _state[2] >= MAX_DEFERRED:
                _state[2] = 0
                collect = True
    finally:
        _lock.release()
    if collect:
        gc.collect()

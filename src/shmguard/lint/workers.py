"""Forked worker processes (Linux), as ``shmguard check --jobs`` uses them over files
(:mod:`shmguard.lint.check_files`) and over the parts of one big stream
(:mod:`shmguard.lint.check_stream_jobs`): each inherits the loaded modules, the configuration
and the user-defined checks without pickling them, and sends its results back as a pickle
through its own pipe; it is killed when this process ends."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from typing import NoReturn

__all__ = ["fork", "lost", "send", "stop"]


def fork(children: list[Callable[[int], object]], kids: list[tuple[int, int]]) -> None:
    """Fork a worker for each of ``children``, in order, and add its ``(pid, read end)`` to
    ``kids``: the child runs with the write end of its own pipe, and must end the process
    (:func:`send`); it is killed when this process ends (:func:`_die_with`). When no more
    processes can be forked (the descriptor or process limits: ``ulimit -n``, ``ulimit -u``;
    memory), the rest are not: the caller does their work."""
    # the objects made so far stay out of the workers' collections: the collector would
    # otherwise touch, and so copy, every page of them (the gc.freeze documentation)
    gc.freeze()
    try:
        parent = os.getpid()
        for child in children:
            try:
                r, w = os.pipe()
            except OSError:  # out of descriptors (EMFILE)
                break
            try:
                pid = os.fork()
            except OSError:  # out of processes or memory (EAGAIN, ENOMEM)
                os.close(r)
                os.close(w)
                break
            if pid == 0:
                os.close(r)
                _die_with(parent)
                child(w)
                os._exit(1)  # (a child that returned)
            os.close(w)
            kids.append((pid, r))
    finally:
        gc.unfreeze()


class WorkerLost(RuntimeError):
    """A forked check worker ended without sending its results whole (killed: by the OOM
    killer, a user's ``kill -9``): the check cannot be complete. The CLI says it in one line
    and exits 2."""


def lost(pid: int, status: int) -> WorkerLost:
    """The error for the worker ``pid`` that ended (``status``, from ``waitpid``) without
    sending its results whole."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        import signal

        how = f"killed by {signal.Signals(-code).name}"
    else:
        how = f"exit status {code}"
    return WorkerLost(f"check worker {pid} ended ({how}) without its results")


def stop(kids: list[tuple[int, int]]) -> None:
    """Close the read ends left open in ``kids`` (``-1``: closed) and stop those workers
    (after an error here, or a worker's)."""
    import signal

    for pid, r in kids:
        if r >= 0:
            os.close(r)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _die_with(parent: int) -> None:
    """In a forked worker: be killed (SIGKILL) when this process's parent ``parent`` ends, so
    that a ``shmguard check`` killed by SIGTERM or SIGKILL leaves no worker checking the rest
    of the queue on its own (prctl(2) ``PR_SET_PDEATHSIG``); end now if it has already ended."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1  # linux/prctl.h
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)


def send(w: int, work: Callable[[], object]) -> NoReturn:
    """A forked worker: write ``(True, work())`` or ``(False, exception)`` as one pickle to
    the pipe ``w``, and end without running this process's exit handlers or flushing the
    buffers it inherited (``os._exit``)."""
    import pickle
    import traceback

    code = 0
    try:
        try:
            payload: tuple[bool, object] = (True, work())
        except BaseException as err:  # sent to the parent, which raises it
            code = 1
            err.add_note("in a check worker process:\n" + traceback.format_exc())
            payload = (False, err)
        try:
            blob = pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)
        except Exception:  # an exception that does not pickle
            blob = pickle.dumps((False, RuntimeError(traceback.format_exc())))
        with os.fdopen(w, "wb") as fh:
            fh.write(blob)
    finally:
        os._exit(code)

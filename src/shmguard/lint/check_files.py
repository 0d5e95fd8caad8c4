"""Checking (and fixing) the files of `shmguard check`
(:func:`shmguard.lint.report.check_paths`): one at a time, or in several processes.

:func:`check_files` yields one :class:`Checked` per path, in the order of the paths, whichever
way it runs, so the report of ``check`` does not depend on it (tests/lint/config/
test_check_jobs.py compares the serial and parallel output byte for byte). Every file is read
through the one bounded reader (:mod:`shmguard.sources.read`); what a walk met and could not
read as text is :attr:`Checked.skipped`, and ``--fix`` writes only regular files inside the
walked tree (:class:`Reading`). Nothing here
prints: a file that could not be written is a :attr:`Checked.write_error`. The other processes
are forked (``os.fork``, Linux only): they inherit the loaded modules, the configuration and
the user-defined checks without pickling them, and start in milliseconds; on macOS a forked
child is unsafe and a spawned one would import shmguard again (the :mod:`multiprocessing`
documentation, "Contexts and start methods"), so there the files are checked in this process.
They are too with ``--fix`` (files are written by one process), with standard input among the
paths, for fewer than :data:`FILES_PER_JOB` files per process, and with ``--jobs 1``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import struct
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from shmguard.sources.read import READ_TIMEOUT

if TYPE_CHECKING:
    from shmguard.config import Config
    from shmguard.lint.check import CheckOptions, FileResult
    from shmguard.model.finding import Finding
    from shmguard.sources.diagnostics import SourceDiagnostic

__all__ = [
    "BYTES_PER_JOB",
    "FILES_PER_JOB",
    "FILE_COST",
    "SKIPPED",
    "Checked",
    "Reading",
    "check_files",
    "check_one",
    "jobs_for",
    "stream_jobs_for",
    "usable_cpus",
]

#: The fewest files per process when ``--jobs`` is automatic (0): below it the files are
#: checked in this process.
FILES_PER_JOB = 64

#: The least work per process when ``--jobs`` is automatic (0), in bytes: each file counts
#: its size plus :data:`FILE_COST`. A worker costs about 20 ms of CPU time on the development
#: machine (the fork, the pages it then copies, the pickle of its results), and checking
#: takes about 0.07 ms a KiB of YAML plus 0.15 ms a file, so 768 KiB is some 60 ms of work.
#: Measured there (15 alternated runs each): 128 corpus YAML files (430 KiB) took 52 ms in one
#: process and 71 ms in two; 256 of them (1.6 MiB) 132 ms and 89 ms.
BYTES_PER_JOB = 768 * 1024

#: What a file costs to check besides its bytes, in bytes of YAML (0.15 ms: about 2 KiB).
FILE_COST = 2048

#: The most files in a chunk, the unit of work the processes take from their queue: small
#: enough that no process waits long for the last one (a corpus file takes about 0.7 ms).
CHUNK = 8

#: A chunk's start in the work queue (a pipe): 4 bytes.
_START = struct.Struct("=I")

#: The most chunks: their starts are written to the pipe before any reader runs, so they must
#: fit in its buffer: 4 KiB, one page, the least a Linux pipe holds (pipe(7): 64 KiB by
#: default, fewer pages once a user's pipes pass pipe-user-pages-soft). Chunks grow beyond
#: :data:`CHUNK` files for more than 8,192 files.
_MAX_CHUNKS = 1024


@dataclasses.dataclass(frozen=True)
class Checked:
    """What checking (and fixing) one file gave.

    Attributes:
        result: the findings (left after the fixes written) and diagnostics.
        data: the bytes checked (after the fixes written), None when not decoded or not asked
            for (``keep_data``) unless ``fixed_data`` is set.
        fixed: the fixes applied (written, or with ``diff`` to be written; counted when the
            write failed too).
        repaired: the findings whose fixes were written.
        fixed_data: with ``diff``, the bytes the fixes would write (None: no change).
        write_error: ``<path>: cannot write: <reason>`` when the fixed file could not be
            written (the file is left as it was).
        skipped: why a file met in a directory walk was not read (:data:`SKIPPED`:
            ``binary``, ``too-large``, ``not-utf8``), else None; such a file is no error.
    """

    result: FileResult
    data: bytes | None
    fixed: int = 0
    repaired: tuple[Finding, ...] = ()
    fixed_data: bytes | None = None
    write_error: str | None = None
    skipped: str | None = None


#: The diagnostics that make a file met in a directory walk skipped (counted by reason), not an
#: error: images, checkpoints, tarballs, big CSVs. Named on the command line they are errors.
SKIPPED = frozenset({"binary", "too-large", "not-utf8"})


def usable_cpus() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``: a container's cpuset or
    ``taskset``), else ``os.cpu_count()``, at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def jobs_for(requested: int, paths: list[str], *, fix: bool) -> int:
    """How many processes (this one included) check ``paths``: 1 with ``fix``, with ``-`` in
    ``paths`` or where ``fork`` is not used (not Linux); ``requested`` (at most one per path)
    when it is above 0; else (automatic) the usable CPUs, at most one per
    :data:`FILES_PER_JOB` paths and one per :data:`BYTES_PER_JOB` of work (:func:`_work`)."""
    if fix or "-" in paths or not sys.platform.startswith("linux") or requested == 1:
        return 1
    if requested > 1:
        return max(1, min(requested, len(paths)))
    most = min(usable_cpus(), len(paths) // FILES_PER_JOB)
    if most <= 1:
        return 1
    return max(1, min(most, _work(paths, most * BYTES_PER_JOB) // BYTES_PER_JOB))


#: The most processes an automatic ``--jobs`` checks one big stream in: each worker holds a
#: copy of the text before its part and, on the 15 MB stream of 96,774 Pods, about 180 MB of
#: RSS at its peak (266 MB this process), so two stay under 600 MB together on any machine;
#: ``--jobs N`` asks for more.
STREAM_JOBS_AUTO = 2


def stream_jobs_for(requested: int, size: int) -> int:
    """How many processes check one big Kubernetes stream of ``size`` bytes
    (:func:`~shmguard.lint.check.check_stream`): ``requested`` when above 0, else
    (automatic) one per :data:`BYTES_PER_JOB`, at most :data:`STREAM_JOBS_AUTO`; at most one
    per usable CPU either way (more processes than CPUs would not check faster); 1 where
    ``fork`` is not used (not Linux)."""
    if not sys.platform.startswith("linux"):
        return 1
    most = usable_cpus()
    if requested > 0:
        return min(requested, most)
    return max(1, min(most, STREAM_JOBS_AUTO, size // BYTES_PER_JOB))


def _work(paths: list[str], enough: int) -> int:
    """The work of checking ``paths``, in bytes: their sizes (0 for one that cannot be read)
    and :data:`FILE_COST` each; counted until it reaches ``enough``."""
    total = FILE_COST * len(paths)
    for path in paths:
        if total >= enough:
            break
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total


@dataclasses.dataclass(frozen=True)
class Reading:
    """How the files of one run are read (from the walk, :class:`shmguard.sources.discover.Walk`).

    Attributes:
        walked: the paths met in a directory walk (a binary, over-cap or undecodable one is
            skipped, not an error).
        outside: walked symbolic links whose real path is outside the walked directory:
            checked, never written by ``--fix``.
        timeout: seconds a FIFO or device named by path may deliver nothing (None: wait).
    """

    walked: frozenset[str] = frozenset()
    outside: frozenset[str] = frozenset()
    timeout: float | None = READ_TIMEOUT


def check_one(
    path: str,
    options: CheckOptions,
    conf: Config,
    *,
    fix: bool,
    diff: bool,
    unsafe: bool,
    reading: Reading | None = None,
    stream_jobs: int = 1,
) -> Checked:
    """Check ``path`` (and with ``fix`` write its fixes; with ``diff`` compute them), the
    cyclic garbage collector paused until its graph is freed (sources/gcpause.py). A big
    Kubernetes stream is checked in ``stream_jobs`` processes (0: automatic;
    :func:`~shmguard.lint.check.check_stream`)."""
    from shmguard.sources import gcpause

    gcpause.pause()
    try:
        return _check_one(path, options, conf, fix, diff, unsafe, reading or Reading(), stream_jobs)
    finally:
        gcpause.resume()


def _not_written(path: str, why: str) -> SourceDiagnostic:
    from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic

    return SourceDiagnostic(path, None, None, why, DiagnosticKind.NOT_WRITTEN, info=True)


def _unwritable(path: str, reading: Reading) -> str | None:
    """Why ``--fix`` must not write ``path``: a symbolic link out of the walked tree, or no
    regular file (a FIFO or device named on the command line); None when it may."""
    if path in reading.outside:
        real = os.path.realpath(path)
        return f"not fixed: a symbolic link to {real}, outside the directory walked (read only)"
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return None  # the write reports it
    return None if regular else "not fixed: not a regular file (read only)"


def _check_one(
    path: str,
    options: CheckOptions,
    conf: Config,
    fix: bool,
    diff: bool,
    unsafe: bool,
    reading: Reading,
    stream_jobs: int,
) -> Checked:
    from shmguard.lint.check import FileResult, check_loaded, check_stream, fix_file, write_atomic
    from shmguard.sources.load import LoadedFile, load_bytes
    from shmguard.sources.read import read_input
    from shmguard.sources.text import SourceText

    raw = read_input(path, timeout=reading.timeout)
    if isinstance(raw, bytes) and not (fix or diff):
        # a big stream of documents: checked one document at a time (no webhook
        # configuration in it, so nothing for cover() below)
        jobs = stream_jobs_for(stream_jobs, len(raw))
        streamed = check_stream(raw, path, options, config=conf, jobs=jobs)
        if streamed is not None:
            return Checked(streamed, raw)
    lf = (
        load_bytes(raw, path)
        if isinstance(raw, bytes)
        else LoadedFile(path, "error", diagnostics=(raw,))
    )
    if lf.kind == "error" and path in reading.walked:
        skip = next((str(d.kind.value) for d in lf.diagnostics if d.kind.value in SKIPPED), None)
        if skip is not None:
            return Checked(FileResult(path, lf.kind, (), lf.diagnostics), None, skipped=skip)
    data = lf.src.data if lf.src is not None else None
    if fix and data is not None and lf.kind != "error":
        why = _unwritable(path, reading)
        if why is not None:
            result = check_loaded(lf, options, config=conf)
            note = _not_written(path, why)
            return Checked(
                dataclasses.replace(result, diagnostics=(*result.diagnostics, note)), data
            )
    if not (fix or diff) or data is None or lf.kind == "error":
        result = check_loaded(lf, options, config=conf)
        if lf.kind == "kubernetes":  # a stream that holds the shmguard webhook's objects
            from shmguard.lint.coverage import cover, stream_view

            result = cover(result, lf, stream_view(lf))
        return Checked(result, data)
    src = lf.src
    assert src is not None
    del lf  # not held beside the fixes' loads: a 7 MB run line's words are 300 MB
    fr = fix_file(data, path, options, config=conf, unsafe=unsafe)
    if fr.data == data:
        return Checked(fr.remaining, data)
    if diff:
        result = check_loaded(load_bytes(data, path), options, config=conf)
        return Checked(result, data, len(fr.applied), fixed_data=fr.data)
    try:
        write_atomic(path, src.encoded(fr.data))  # a UTF-16 file stays UTF-16
    except OSError as err:
        result = check_loaded(load_bytes(data, path), options, config=conf)
        why = f"{path}: cannot write: {err.strerror or err}"
        return Checked(result, data, len(fr.applied), write_error=why)
    new = SourceText.decode(fr.data, path)  # what load_bytes(fr.data, path).src is
    kept = new.data if isinstance(new, SourceText) else None
    return Checked(fr.remaining, kept, len(fr.applied), fr.applied)


def check_files(
    paths: list[str],
    options: CheckOptions,
    conf: Config,
    *,
    fix: bool,
    diff: bool,
    unsafe: bool,
    jobs: int,
    keep_data: bool,
    reading: Reading | None = None,
    stream_jobs: int = 1,
) -> Iterator[Checked]:
    """:func:`check_one` for each of ``paths``, in their order, in ``jobs`` processes (from
    :func:`jobs_for`; 1: this one alone). ``fix`` needs ``jobs`` 1. With ``jobs`` 1, a big
    Kubernetes stream is checked in ``stream_jobs`` processes (the ``--jobs`` asked; 0:
    automatic), so that one file also uses the CPUs; with more, in its worker alone.
    ``data`` is None unless ``keep_data`` or the file has ``fixed_data`` (the bytes are most
    of what the workers send), however many processes check. An exception
    raised in a worker is raised here (with the worker's traceback as a note), as it would be
    serially. When no more processes can be forked (the descriptor or process limits:
    ``ulimit -n``, ``ulimit -u``), the ones forked so far check the files.

    With ``jobs`` n above 1, n - 1 workers are forked and this process is the n-th: each takes
    chunks of up to :data:`CHUNK` paths from one work queue (a pipe holding the chunks'
    starts) until it is empty, so a process that gets less CPU time takes fewer chunks instead
    of holding the others up; each worker sends its results as one pickle through its own
    pipe, and they are put back in the order of the paths. Beside a
    :class:`multiprocessing.pool.Pool` this has no task pickling, no handler threads and one
    worker fewer. Over ../shared/corpus on the 2-CPU development machine (under load from other
    jobs, load average 2.5-3.3; the least of six runs each) checking in one process took
    1.04-1.05 s of CPU time, a pool of two workers 1.20 s, this with two processes 1.12 s."""
    if jobs > 1 and fix:
        raise ValueError("--fix writes files in this process: jobs must be 1")

    inner = stream_jobs if jobs <= 1 and not fix else 1  # workers do not fork again

    def run(path: str) -> Checked:
        return check_one(
            path,
            options,
            conf,
            fix=fix,
            diff=diff,
            unsafe=unsafe,
            reading=reading,
            stream_jobs=inner,
        )

    def lean(path: str) -> Checked:
        got = run(path)
        return got if got.fixed_data is not None else dataclasses.replace(got, data=None)

    each = run if keep_data else lean
    if jobs <= 1:
        yield from map(each, paths)
    else:
        yield from _forked(paths, jobs, each)


def _forked(paths: list[str], n: int, run: Callable[[str], Checked]) -> list[Checked]:
    import pickle

    # imported here rather than in every worker (each file's check may need them)
    import shmguard.lint.check
    import shmguard.lint.coverage  # noqa: F401
    from shmguard.lint.workers import fork, lost, send, stop

    # the work queue: the start of every chunk, 4 bytes each, written whole before any reader
    # exists, so each read of 4 bytes takes one start (or none: the end of the queue)
    size = max(1, min(CHUNK, len(paths) // (n * 8)), -(-len(paths) // _MAX_CHUNKS))
    queue_r, queue_w = os.pipe()
    try:
        os.write(queue_w, b"".join(_START.pack(i) for i in range(0, len(paths), size)))
    finally:
        os.close(queue_w)
    kids: list[tuple[int, int]] = []
    try:
        fork([lambda w: send(w, lambda: _take(queue_r, paths, size, run))] * (n - 1), kids)
        out: list[Checked | None] = [None] * len(paths)
        for start, got in _take(queue_r, paths, size, run):
            out[start : start + len(got)] = got
        while kids:
            pid, r = kids[0]
            with os.fdopen(r, "rb") as fh:
                kids[0] = (pid, -1)  # the file object closes r
                blob = fh.read()
            kids.pop(0)
            _, status = os.waitpid(pid, 0)
            try:
                ok, done = pickle.loads(blob)
            except Exception as err:  # a worker that died leaves a short pickle or none
                raise lost(pid, status) from err
            if not ok:
                raise done
            for start, got in done:
                out[start : start + len(got)] = got
        return [c for c in out if c is not None]
    finally:
        os.close(queue_r)
        stop(kids)


def _take(
    queue: int, paths: list[str], size: int, run: Callable[[str], Checked]
) -> list[tuple[int, list[Checked]]]:
    """Check chunks of ``size`` paths taken from the work queue ``queue`` until it is empty:
    ``(start, results)`` for each chunk taken."""
    done = []
    while start := os.read(queue, _START.size):
        (i,) = _START.unpack(start)
        done.append((i, [run(p) for p in paths[i : i + size]]))
    return done

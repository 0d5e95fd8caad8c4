"""One big Kubernetes stream checked in several processes (``shmguard check --jobs``).

:func:`check_parts` cuts the stream at document start markers into runs of whole documents
(:func:`shmguard.sources.yamlload.cut_documents`), one per process, and checks them at once:
this process the first, forked workers the others (as :mod:`shmguard.lint.check_files`
forks them over files (:mod:`shmguard.lint.workers`: results pickled back, killed with this
process). Each part is composed behind blanks as long as the text
before it, so its documents have their positions in the whole file
(:func:`~shmguard.sources.yamlload.iter_part`) and its findings are the serial check's; the
caller drops the findings met twice over every part in order and sorts them, as the serial
check does (tests/lint/test_check_stream_jobs.py compares the output byte for byte).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

from shmguard.sources.load import Unstreamable

if TYPE_CHECKING:
    from shmguard.model.finding import Finding
    from shmguard.sources.text import SourceText
    from shmguard.sources.yamlload import Part

__all__ = ["PartResult", "check_parts"]


@dataclasses.dataclass(frozen=True)
class PartResult:
    """One part's check: its findings (not suppressed, each once, in unit order), its number
    of documents and whether one of them is a Kubernetes object."""

    findings: list[Finding]
    documents: int
    objects: bool


def check_parts(
    src: SourceText, jobs: int, run: Callable[[Part], PartResult]
) -> list[list[Finding]] | None:
    """``run`` over the parts of ``src`` (at most ``jobs``), at once, in as many processes:
    each part's findings, in file order. None when the stream is not cut (``jobs`` 1, a text
    :func:`~shmguard.sources.yamlload.cut_documents` does not cut, parts whose documents do
    not add up): the caller checks it in one process.

    Raises:
        Unstreamable: a part raised it, or no part holds a Kubernetes object (the serial
            check's whole-file case).
    """
    from shmguard.sources.yamlload import cut_documents

    parts = cut_documents(src, jobs) if jobs > 1 else None
    if parts is None:
        return None
    done = _forked(parts, run)
    if any(r is None for r in done):
        raise Unstreamable("a part")
    got = [r for r in done if r is not None]
    for part, after, r in zip(parts, parts[1:], got, strict=False):
        if part.first + r.documents != after.first:  # not cut where documents start
            return None
    if not any(r.objects for r in got):
        raise Unstreamable("no Kubernetes object")
    return [r.findings for r in got]


#: Findings per pickle a worker sends (each a whole pickle, with its own memo), so neither
#: side holds a pickle of all its findings (41 MB for 48k Pods) nor its memo.
BATCH = 1024


def _forked(parts: tuple[Part, ...], run: Callable[[Part], PartResult]) -> list[PartResult | None]:
    """``run`` of every part, the first in this process and each other in a forked worker
    (in this process too when no worker can be forked); None for a part that raised
    :class:`Unstreamable`. An exception raised in a worker is raised here."""
    from shmguard.lint.workers import fork, lost, stop

    def one(part: Part) -> PartResult | None:
        try:
            return run(part)
        except Unstreamable:
            return None

    kids: list[tuple[int, int]] = []  # (pid, read end) of the workers of parts 1, 2, ...
    out: list[PartResult | None] = [None] * len(parts)
    try:
        fork([functools.partial(_send, work=functools.partial(one, p)) for p in parts[1:]], kids)
        for i, part in enumerate(parts):  # the first, and any that could not be forked
            if not 1 <= i <= len(kids):
                out[i] = one(part)
        i = 0
        while kids:
            i += 1
            pid, r = kids[0]
            with os.fdopen(r, "rb") as fh:
                kids[0] = (pid, -1)  # the file object closes r
                findings, last = _received(fh)
            kids.pop(0)
            _, status = os.waitpid(pid, 0)
            if last is None:  # a worker that died leaves a short pickle or none
                raise lost(pid, status)
            if last[0] == "error":
                raise last[1]
            out[i] = PartResult(findings, last[1], last[2]) if last[0] == "done" else None
        return out
    finally:
        stop(kids)


def _send(w: int, work: Callable[[], PartResult | None]) -> NoReturn:
    """A forked worker: write the outcome of ``work()`` to the pipe ``w`` as pickles, its
    findings :data:`BATCH` at a time then ``("done", documents, objects)``, or
    ``("unstreamable",)``, or ``("error", exception)``; end without running this process's
    exit handlers or flushing the buffers it inherited (``os._exit``)."""
    import pickle
    import traceback

    code = 0
    try:
        with os.fdopen(w, "wb") as fh:

            def out(msg: tuple[object, ...]) -> None:
                pickle.dump(msg, fh, pickle.HIGHEST_PROTOCOL)  # one whole pickle a message

            try:
                got = work()
            except BaseException as err:  # sent to the parent, which raises it
                code = 1
                err.add_note("in a check worker process:\n" + traceback.format_exc())
                try:
                    out(("error", err))
                except Exception:  # an exception that does not pickle
                    out(("error", RuntimeError(traceback.format_exc())))
            else:
                if got is None:
                    out(("unstreamable",))
                else:
                    for k in range(0, len(got.findings), BATCH):
                        out(("findings", got.findings[k : k + BATCH]))
                    out(("done", got.documents, got.objects))
    finally:
        os._exit(code)


def _received(fh: BinaryIO) -> tuple[list[Finding], tuple[Any, ...] | None]:
    """The findings a worker sent through ``fh`` (:func:`_send`) and its last message (None
    when the pickles end before it: the worker died)."""
    import pickle

    findings: list[Finding] = []
    try:
        while (msg := pickle.load(fh))[0] == "findings":
            findings.extend(msg[1])
    except Exception:  # a short pickle, or none
        return findings, None
    return findings, msg

"""Failure triage: signatures as data files, matchers and the classifier behind ``explain``.

Typical use::

    from shmguard.triage import explain_files
    diagnosis = explain_files([Path("train.log")])          # several files: one incident
    for name, d in explain_each([Path("a.log"), Path("b.log")]):  # one diagnosis per file
        ...

An in-memory text (a run's output) goes through :func:`classify_text`, the same classifier;
``measure``, ``probe`` and the hang detector use it. The library never prints;
:mod:`shmguard.render.explain_text` and the JSON envelope render a
:class:`~shmguard.triage.model.Diagnosis`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from shmguard.estimate.policy import Policy, Sized
from shmguard.triage.classify import diagnose
from shmguard.triage.loader import SignatureError, load_catalogue
from shmguard.triage.matchers import Matcher
from shmguard.triage.model import Diagnosis, Result, Signature
from shmguard.triage.text import builtin_catalogue, classify_text, diagnose_text, top_cause

__all__ = [
    "Diagnosis",
    "Result",
    "Signature",
    "SignatureError",
    "classify_text",
    "diagnose_text",
    "explain_each",
    "explain_files",
    "explain_streams",
    "load_catalogue",
    "top_cause",
]


def explain_streams(
    inputs: Iterable[tuple[str, BinaryIO]],
    *,
    signatures: Sequence[Signature] | None = None,
    runtime: str | None = None,
    shm_size: int | Sized | None = None,
    backend: str = "auto",
    policy: Policy | None = None,
    interruptible: bool = False,
) -> Diagnosis:
    """Diagnose binary streams (``(display name, stream)`` pairs), read to the end in
    constant memory.

    Args:
        signatures: the catalogue; default the built-in one, loaded once per process
            (:func:`~shmguard.triage.text.builtin_catalogue`).
        runtime: ``docker``, ``compose``, ``kubernetes``, ``podman``, ``ecs`` or ``app``;
            None infers it from the log.
        shm_size: bytes to use in fixes instead of the chosen size, or a
            :class:`~shmguard.estimate.policy.Sized` (bytes and the basis to print).
        backend: literal pre-filter, ``auto``, ``ac`` (Aho-Corasick) or ``find``.
        policy: the sizing policy for the fixes (``[tool.shmguard.sizes]``); default
            :class:`~shmguard.estimate.Policy`.
        interruptible: a KeyboardInterrupt while reading (Ctrl-C on an endless pipe, or a
            SIGTERM the caller turns into one) ends the reading instead of propagating: the
            diagnosis is of what was read so far, and its first note, :data:`PARTIAL_NOTE`,
            says so.

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
        OSError: reading a stream failed.
    """
    sigs = builtin_catalogue() if signatures is None else signatures
    m = Matcher(sigs, backend=backend)
    partial = False
    try:
        for name, stream in inputs:
            m.feed(name, stream)
    except KeyboardInterrupt:
        if not interruptible:
            raise
        partial = True
    d = diagnose(m, runtime=runtime, shm_override=shm_size, policy=policy)
    return dataclasses.replace(d, notes=(PARTIAL_NOTE, *d.notes)) if partial else d


#: The note of a diagnosis whose reading was interrupted (:func:`explain_streams`).
PARTIAL_NOTE = (
    "partial: reading was interrupted; this diagnosis covers only the input read until then"
)


def explain_files(
    paths: Iterable[Path],
    *,
    signatures: Sequence[Signature] | None = None,
    runtime: str | None = None,
    shm_size: int | None = None,
    backend: str = "auto",
    policy: Policy | None = None,
) -> Diagnosis:
    """:func:`explain_streams` over files, each opened in binary mode in turn and closed after.

    Raises:
        OSError: a file cannot be opened or read.
    """

    def opened() -> Iterator[tuple[str, BinaryIO]]:
        for p in paths:
            with p.open("rb") as f:
                yield str(p), f

    return explain_streams(
        opened(),
        signatures=signatures,
        runtime=runtime,
        shm_size=shm_size,
        backend=backend,
        policy=policy,
    )


def explain_each(
    inputs: Iterable[Path | tuple[str, BinaryIO]],
    *,
    signatures: Sequence[Signature] | None = None,
    runtime: str | None = None,
    shm_size: int | None = None,
    backend: str = "auto",
    policy: Policy | None = None,
) -> Iterator[tuple[str, Diagnosis]]:
    """Diagnose each input on its own: yield ``(name, Diagnosis)`` per input, in order.

    Where :func:`explain_streams` treats its inputs as one incident (facts and the runtime of
    one size the fixes of all), here every input gets its own ranked causes, runtime, facts,
    fixes and next steps, exactly as :func:`explain_streams` would give for that input alone.
    The catalogue is loaded and the literal pre-filter built once for all inputs; each input
    is read to the end in constant memory before its diagnosis is yielded, and nothing of it
    is kept after, so memory does not grow with the number of inputs.

    Args:
        inputs: :class:`~pathlib.Path` objects (opened in binary mode when their turn comes,
            closed after; the name is ``str(path)``) and/or ``(display name, binary stream)``
            pairs (read, not closed). Consumed lazily.
        signatures, runtime, shm_size, backend, policy: as for :func:`explain_streams`;
            ``runtime`` and ``shm_size`` apply to every input.

    Yields:
        ``(name, diagnosis)``; ``diagnosis.inputs`` has the one input.

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
        OSError: an input cannot be opened or read (for a path, ``err.filename`` names it).
            The iteration stops there; the inputs after it are still in ``inputs`` when that
            is an iterator, so calling :func:`explain_each` again on the same iterator goes
            on with the next one (``shmguard explain --per-file`` does this).
    """
    sigs = builtin_catalogue() if signatures is None else signatures
    m = Matcher(sigs, backend=backend)
    for item in inputs:
        m.reset()
        if isinstance(item, tuple):
            name, stream = item
            m.feed(name, stream)
        else:
            name = str(item)
            with Path(item).open("rb") as f:
                m.feed(name, f)
        yield name, diagnose(m, runtime=runtime, shm_override=shm_size, policy=policy)

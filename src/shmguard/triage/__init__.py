"""Failure triage: signatures as data files, matchers and the classifier behind ``explain``.

Typical use::

    from shmguard.triage import explain_files
    diagnosis = explain_files([Path("train.log")])

An in-memory text (a run's output) goes through :func:`classify_text`, the same classifier;
``measure``, ``probe`` and the hang detector use it. The library never prints;
:mod:`shmguard.render.explain_text` and the JSON envelope render a
:class:`~shmguard.triage.model.Diagnosis`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from shmguard.estimate.policy import Policy
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
    shm_size: int | None = None,
    backend: str = "auto",
    policy: Policy | None = None,
) -> Diagnosis:
    """Diagnose binary streams (``(display name, stream)`` pairs), read to the end in
    constant memory.

    Args:
        signatures: the catalogue; default the built-in one, loaded once per process
            (:func:`~shmguard.triage.text.builtin_catalogue`).
        runtime: ``docker``, ``compose``, ``kubernetes``, ``podman``, ``ecs`` or ``app``;
            None infers it from the log.
        shm_size: bytes to use in fixes instead of the chosen size.
        backend: literal pre-filter, ``auto``, ``ac`` (Aho-Corasick) or ``find``.
        policy: the sizing policy for the fixes (``[tool.shmguard.sizes]``); default
            :class:`~shmguard.estimate.Policy`.

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
        OSError: reading a stream failed.
    """
    sigs = builtin_catalogue() if signatures is None else signatures
    m = Matcher(sigs, backend=backend)
    for name, stream in inputs:
        m.feed(name, stream)
    return diagnose(m, runtime=runtime, shm_override=shm_size, policy=policy)


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

"""Classify an in-memory text with the built-in catalogue: the one classifier of failure text.

``explain`` reads files and streams; ``measure``, ``probe`` and the hang detector have a run's
output in memory (a tail of tens of KiB). They call :func:`classify_text`, which runs the same
:class:`~shmguard.triage.matchers.Matcher` and :func:`~shmguard.triage.classify.diagnose` as
``explain``, so a run's cause is what ``explain`` says of the same text.

Typical use::

    from shmguard.triage.text import classify_text, top_cause
    results = classify_text(output_bytes)
    cause = top_cause(results)        # a Result, or None when no cause matched
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence

from shmguard.triage.classify import diagnose
from shmguard.triage.loader import load_catalogue
from shmguard.triage.matchers import Matcher
from shmguard.triage.model import Diagnosis, Result, Signature


@functools.cache
def builtin_catalogue() -> tuple[Signature, ...]:
    """The built-in signatures (:func:`~shmguard.triage.loader.load_catalogue`), loaded and
    validated once per process (about 70 ms) and shared by every later call.

    Raises:
        SignatureError: the built-in catalogue is broken (never in a release).
    """
    return load_catalogue()


@functools.cache
def signature_by_id() -> dict[str, Signature]:
    """``{id: Signature}`` of :func:`builtin_catalogue` (do not modify the returned dict)."""
    return {s.id: s for s in builtin_catalogue()}


def diagnose_text(
    text: str | bytes,
    name: str = "output",
    *,
    signatures: Sequence[Signature] | None = None,
) -> Diagnosis:
    """The full :class:`~shmguard.triage.model.Diagnosis` of one in-memory text, as
    ``explain`` makes it for a file of that content named ``name``.

    Args:
        text: the log; ``str`` is encoded as UTF-8, ``bytes`` are read as ``explain`` reads a
            file (invalid UTF-8 replaced, NUL and ANSI colours removed).
        name: the input name the evidence carries (``Evidence.file``).
        signatures: the catalogue; default :func:`builtin_catalogue`.

    Cost: building the matcher (about 3 ms, the Aho-Corasick automatons) plus about 0.1 ms per
    KiB of text; no fix depends on a runtime flag here (the runtime is inferred from the text).
    """
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    m = Matcher(builtin_catalogue() if signatures is None else signatures)
    m.feed(name, io.BytesIO(data))
    return diagnose(m)


def classify_text(
    text: str | bytes,
    name: str = "output",
    *,
    signatures: Sequence[Signature] | None = None,
) -> tuple[Result, ...]:
    """The ranked results of :func:`diagnose_text`: causes first (unexplained before those
    another matched signature explains), then by confidence, priority and first line; ``info``
    results after them. Empty when nothing matched.
    """
    return diagnose_text(text, name, signatures=signatures).results


def top_cause(results: Sequence[Result]) -> Result | None:
    """The cause ``explain`` reports first: the highest-ranked result of role ``cause`` that no
    other matched signature explains, or None when there is none."""
    return next((r for r in results if r.role == "cause" and r.explained_by is None), None)

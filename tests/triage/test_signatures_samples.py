"""Meta-test: every signature file ships positive and negative samples, every positive sample
set exercises every wording variant, and no negative sample triggers its signature."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from shmguard.triage.loader import builtin_dir, load_dir
from shmguard.triage.matchers import Matcher

SAMPLES = builtin_dir() / "samples"
SIGS = load_dir(builtin_dir())


def _samples(sig_id: str, kind: str) -> list[Path]:
    return sorted(SAMPLES.glob(f"{sig_id}.{kind}*.log"))


def _run(paths: list[Path]) -> Matcher:
    m = Matcher(SIGS)
    for p in paths:
        m.feed(p.name, io.BytesIO(p.read_bytes()))
    return m


def test_every_sample_file_belongs_to_a_signature() -> None:
    ids = {s.id for s in SIGS}
    for p in SAMPLES.iterdir():
        sig_id, kind = p.name.split(".")[:2]
        assert sig_id in ids, f"{p.name}: no signature {sig_id!r}"
        assert kind.rstrip("0123456789") in ("pos", "neg"), p.name


@pytest.mark.parametrize("sig", SIGS, ids=lambda s: s.id)
def test_positive_samples_cover_every_pattern(sig: object) -> None:
    from shmguard.triage.model import Signature

    assert isinstance(sig, Signature)
    pos = _samples(sig.id, "pos")
    assert pos, f"{sig.id}: no positive sample"
    m = _run(pos)
    assert sig.id in m.tallies, f"{sig.id}: positive samples did not match"
    matched = set(m.tallies[sig.id].patterns)
    wanted = {p.name for p in sig.patterns if not p.marker}
    assert wanted <= matched, f"{sig.id}: patterns never matched by a sample: {wanted - matched}"


@pytest.mark.parametrize("sig", SIGS, ids=lambda s: s.id)
def test_negative_samples_do_not_match(sig: object) -> None:
    from shmguard.triage.model import Signature

    assert isinstance(sig, Signature)
    neg = _samples(sig.id, "neg")
    assert neg, f"{sig.id}: no negative sample"
    m = _run(neg)
    assert sig.id not in m.tallies, (
        f"{sig.id}: matched its negative sample: {m.tallies[sig.id].evidence}"
    )


def test_ids_unique_and_references_resolve() -> None:
    ids = [s.id for s in SIGS]
    assert len(ids) == len(set(ids))
    for s in SIGS:
        assert set(s.explained_by) <= set(ids)
        for b in s.boosts:
            assert set(b.when) <= set(ids)


def test_every_cause_has_a_fix_and_references() -> None:
    for s in SIGS:
        if s.role == "cause":
            assert s.fix is not None and s.fix.summary, s.id
            assert s.references, s.id
            assert s.cause, s.id

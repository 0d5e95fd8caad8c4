"""Each SHM rule yields findings only for the unit kinds its ``targets`` name, so ``check``
calls a rule only on those units (lint/check.py ``_rules_for``) and finds the same as calling
every rule on every unit."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from shmguard.lint.check import _TARGET_KINDS, _rules_for, check_loaded, units
from shmguard.lint.config import RULES, CheckOptions
from shmguard.sources.discover import discover
from shmguard.sources.load import LoadedFile, load_bytes

HERE = Path(__file__).parent
CORPUS = HERE.parents[2] / ".." / "shared" / "corpus"
FIXTURES = [HERE / "fixtures", HERE / "fixtures_rules_b", HERE.parents[1] / "fixtures" / "policies"]
KINDS = ("compose", "kubernetes", "run", "ecs", "daemon-json", "policy")


def _loaded(with_corpus: bool) -> Iterator[LoadedFile]:
    roots = [str(d) for d in FIXTURES]
    if with_corpus:
        roots += [str(CORPUS / "compose"), str(CORPUS / "k8s")]
    for f in discover(roots):
        yield load_bytes(Path(f).read_bytes(), f)
    if with_corpus:
        with (CORPUS / "docker_run_lines.tsv").open(newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh, delimiter="\t")):
                yield load_bytes((row["command"] + "\n").encode(), f"{i:04d}.sh")


def _corpus_params() -> list[bool]:
    return [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(
                not CORPUS.is_dir(), reason=("../shared/corpus (next to the repository) is absent")
            ),
        ),
    ]


def test_every_rule_targets_unit_kinds() -> None:
    for rule in RULES:
        assert rule.targets and all(t in _TARGET_KINDS for t in rule.targets), rule.code
    assert set(_TARGET_KINDS.values()) == set(KINDS)
    assert [r.code for r in _rules_for("daemon-json")] == ["SHM022"]
    assert [r.code for r in _rules_for("ecs")] == ["SHM029"]
    assert [r.code for r in _rules_for("policy")] == ["SHM033"]
    assert _rules_for("something-else") == RULES
    for kind in KINDS:
        got = _rules_for(kind)
        assert list(got) == [r for r in RULES if r in got]  # code order kept


@pytest.mark.parametrize("with_corpus", _corpus_params())
def test_rules_yield_nothing_for_kinds_they_do_not_target(with_corpus: bool) -> None:
    options = CheckOptions()
    seen: set[str] = set()
    for lf in _loaded(with_corpus):
        for unit in units(lf):
            seen.add(unit.kind)
            for rule in RULES:
                if rule not in _rules_for(unit.kind):
                    assert list(rule.check(unit, options)) == [], (rule.code, lf.path)
    assert seen == set(KINDS)


@pytest.mark.parametrize("with_corpus", _corpus_params())
def test_check_finds_what_every_rule_on_every_unit_finds(with_corpus: bool) -> None:
    findings = 0
    for lf in _loaded(with_corpus):
        got = check_loaded(lf)
        assert got == check_loaded(lf, rules=RULES), lf.path
        findings += len(got.findings)
    assert findings > (300 if with_corpus else 20)

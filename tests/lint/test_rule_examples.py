"""Every configuration rule's documented examples run: ``check`` reports the rule in its bad
file, where a finding can point, and reports nothing in its good file.

The examples are whole files (:class:`shmguard.lint.engine.Example`), read by the file name
they carry as ``check`` reads a real file of that name, with the default options and no
configuration; docs/rules-shm.md renders them (tests/lint/test_rule_docs.py).
"""

from __future__ import annotations

import re

import pytest

from shmguard.lint.check import check_loaded, fix_file
from shmguard.lint.config import RULES
from shmguard.lint.engine import Example, Rule
from shmguard.model.finding import Applicability, Finding
from shmguard.sources.load import load_bytes


def _check(ex: Example) -> tuple[str, tuple[Finding, ...]]:
    lf = load_bytes(ex.text.encode(), ex.file)
    assert lf.diagnostics == (), f"{ex.file}: {lf.diagnostics}"
    return lf.kind, check_loaded(lf).findings


def _where(f: Finding) -> str:
    loc = f.location
    return f"{f.code}@{loc.line}:{loc.column}" if loc is not None else f"{f.code}@?"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_bad_example_fires_its_rule_at_a_line_of_the_file(rule: Rule[object, object]) -> None:
    bad = rule.doc.bad
    assert bad is not None, f"{rule.code}: no bad example"
    kind, findings = _check(bad)
    own = [f for f in findings if f.code == rule.code]
    assert own, f"{rule.code}: its bad {bad.file} ({kind}) gives {[_where(f) for f in findings]}"
    lines = bad.text.splitlines()
    for f in own:
        assert f.location is not None and f.location.file == bad.file, _where(f)
        assert f.location.line is not None and 1 <= f.location.line <= len(lines), _where(f)
        assert lines[f.location.line - 1].strip(), f"{_where(f)} is a blank line"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_good_example_is_clean(rule: Rule[object, object]) -> None:
    """Not only its own rule: the file the doc says to write instead draws no finding."""
    good = rule.doc.good
    assert good is not None, f"{rule.code}: no good example"
    kind, findings = _check(good)
    assert findings == (), f"{rule.code}: its good {good.file} ({kind}) gives " + str(
        [_where(f) for f in findings]
    )


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_examples_are_files_of_a_kind_the_rule_targets(rule: Rule[object, object]) -> None:
    """A bad and a good file of the same kind, and one the rule says it checks (a run line
    is either tool's)."""
    assert rule.doc.bad is not None and rule.doc.good is not None
    kinds = {_check(rule.doc.bad)[0], _check(rule.doc.good)[0]}
    # a run line is either tool's; an admission policy is a Kubernetes file
    targets = {
        "run-lines" if t.endswith("-run") else "kubernetes" if t == "kubernetes-policy" else t
        for t in rule.targets
    }
    assert len(kinds) == 1 and kinds <= targets, (rule.code, kinds, rule.targets)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_bad_examples_fix_applies_as_the_rule_tables_say(rule: Rule[object, object]) -> None:
    """The fix column of docs/check.md and docs/rules-shm.md (``RuleDoc.applies``, else the
    rule's fix availability) names the applicability of the bad example's fix."""
    assert rule.doc.bad is not None
    said = rule.doc.applies or rule.fix.value
    for f in _check(rule.doc.bad)[1]:
        if f.code == rule.code and f.fix is not None:
            value = f.fix.applicability.value
            assert re.search(rf"(?<![\w-]){value}(?![\w-])", said), (rule.code, value, said)
            # `rules --json` and SARIF say whether findings carry a fix: a shown one counts
            assert rule.fix.value != "none", f"{_where(f)} carries a {value} fix"
        elif f.code == rule.code:
            assert rule.fix.value != "always", f"{_where(f)} carries no fix"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_the_fix_turns_the_bad_example_into_the_good_one(rule: Rule[object, object]) -> None:
    """Where the rule's fix for the bad file is applied (``--fix``, ``--unsafe-fixes`` for an
    unsafe one), it writes the good file to the byte; a fix that is only shown applies
    nothing."""
    bad, good = rule.doc.bad, rule.doc.good
    assert bad is not None and good is not None
    own = [f for f in _check(bad)[1] if f.code == rule.code]
    applied = [
        f
        for f in own
        if f.fix is not None
        and f.fix.edits
        and f.fix.applicability is not Applicability.DISPLAY_ONLY
    ]
    result = fix_file(bad.text.encode(), bad.file, unsafe=True, rules=[rule])
    if applied:
        assert result.data.decode() == good.text, (
            f"{rule.code}: --fix writes\n{result.data.decode()}"
        )
    else:
        assert result.applied == () and result.data == bad.text.encode()

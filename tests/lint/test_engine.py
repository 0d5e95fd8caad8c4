"""The rule engine: severity from configuration by code and workload, selection, order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shmguard.config import Config
from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation, run_rules
from shmguard.model import Location, Severity

DOC = RuleDoc("w", "y", "f", "s", "```\nx\n```")


def _check(subject: list[tuple[str, str | None]], _options: None) -> Iterator[Violation]:
    for file, variant in subject:
        yield Violation(f"in {file}", Location(file=file, line=1), variant=variant)


RULE = Rule(
    code="TST001",
    name="test-rule",
    summary="a test",
    severity=Severity.WARNING,
    fix=FixAvailability.NONE,
    targets=("host",),
    why="because",
    doc=DOC,
    check=_check,
    by_workload={"ml": Severity.ERROR},
    variants={"quiet": Severity.INFO},
)


def _run(config: Config, workload: str | None, variant: str | None = None) -> Severity:
    (finding,) = run_rules([RULE], [("a.yaml", variant)], None, config=config, workload=workload)
    assert (finding.code, finding.name, finding.why) == ("TST001", "test-rule", "because")
    return finding.severity


def test_defaults_by_workload_and_variant() -> None:
    assert _run(Config(), None) is Severity.WARNING
    assert _run(Config(), "container") is Severity.WARNING
    assert _run(Config(), "ml") is Severity.ERROR
    assert _run(Config(), "ml", "quiet") is Severity.INFO


def test_configuration_wins_over_rule_defaults() -> None:
    conf = Config(
        severity={"TST001": Severity.INFO},
        workload_severity={"ml": {"TST001": Severity.WARNING}},
    )
    assert _run(conf, "container") is Severity.INFO
    assert _run(conf, "ml") is Severity.WARNING
    assert _run(conf, "ml", "quiet") is Severity.WARNING


def test_select_ignore_and_per_file_ignores_drop_findings() -> None:
    subject = [("a.yaml", None), ("legacy/b.yaml", None)]
    assert len(run_rules([RULE], subject, None)) == 2
    assert run_rules([RULE], subject, None, config=Config(ignore=("TST",))) == ()
    assert run_rules([RULE], subject, None, config=Config(select=("ENV",))) == ()
    kept = run_rules(
        [RULE], subject, None, config=Config(per_file_ignores=(("legacy/*", ("TST001",)),))
    )
    assert [f.location.file for f in kept if f.location] == ["a.yaml"]


def test_findings_are_ordered_by_severity_then_code_then_position() -> None:
    subject = [("b.yaml", None), ("a.yaml", "quiet"), ("a.yaml", None)]
    out = run_rules([RULE], subject, None)
    assert [(f.severity, f.location.file if f.location else None) for f in out] == [
        (Severity.WARNING, "a.yaml"),
        (Severity.WARNING, "b.yaml"),
        (Severity.INFO, "a.yaml"),
    ]


def test_unknown_workload_in_rule_metadata_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown workload 'gpu'"):
        Rule(
            code="TST002",
            name="x",
            summary="x",
            severity=Severity.INFO,
            fix=FixAvailability.NONE,
            targets=("host",),
            why="w",
            doc=DOC,
            check=_check,
            by_workload={"gpu": Severity.ERROR},
        )

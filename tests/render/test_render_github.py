"""GitHub Actions workflow commands: exact lines and the runner's escaping."""

from __future__ import annotations

from shmguard.model.finding import Applicability, Edit, Finding, Fix, Location, Severity
from shmguard.render.github import (
    annotation,
    diagnostic_annotation,
    escape_data,
    escape_property,
)
from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic


def test_escaping_matches_the_toolkit() -> None:
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("dir:a,b%\n") == "dir%3Aa%2Cb%25%0A"
    # % first, so an escape is never escaped twice
    assert escape_data("%0A") == "%250A"


def test_finding_on_one_line_with_fix_hint() -> None:
    f = Finding(
        "SHM006",
        "emptydir-medium-not-memory",
        Severity.ERROR,
        "volume 'dshm': emptyDir medium 'memory': 100% wrong",
        None,
        Location("deploy/a,b:c.yaml", 21, 34, 21, 40, 587, 593, "spec.volumes[0]"),
        Fix(
            "Write medium: Memory",
            edits=(Edit(587, 593, "Memory"),),
            applicability=Applicability.SAFE,
        ),
    )
    assert annotation(f, "ignored.yaml") == (
        "::error file=deploy/a%2Cb%3Ac.yaml,line=21,endLine=21,col=34,endColumn=40,"
        "title=SHM006::volume 'dshm': emptyDir medium 'memory': 100%25 wrong"
        "%0Afix (safe): Write medium: Memory"
    )


def test_levels_and_multi_line_ranges_drop_columns() -> None:
    warn = Finding("SHM025", "shm-remount", Severity.WARNING, "remount", None,
                   Location("a.yaml", 3, 5, 5, 2))  # fmt: skip
    assert annotation(warn, "a.yaml") == (
        "::warning file=a.yaml,line=3,endLine=5,title=SHM025::remount"
    )
    info = Finding("SHM002", "x", Severity.INFO, "podman", None, None,
                   Fix("Say 2g"))  # fmt: skip
    assert annotation(info, "run.sh") == (
        "::notice file=run.sh,title=SHM002::podman%0Afix (display-only): Say 2g"
    )


def test_diagnostics() -> None:
    bad = SourceDiagnostic("x.yaml", 2, 7, "mapping values are not allowed here",
                           DiagnosticKind.INVALID_YAML)  # fmt: skip
    assert diagnostic_annotation(bad) == (
        "::error file=x.yaml,line=2,endLine=2,col=7,title=shmguard%3A invalid-yaml::"
        "mapping values are not allowed here"
    )
    skipped = SourceDiagnostic("t.yaml", None, None, "unrendered template",
                               DiagnosticKind.TEMPLATE, info=True)  # fmt: skip
    assert diagnostic_annotation(skipped) == (
        "::notice file=t.yaml,title=shmguard%3A unrendered-template::unrendered template"
    )

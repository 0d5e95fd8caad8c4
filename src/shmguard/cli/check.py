"""`shmguard check`: lint docker/podman run lines, Compose files and Kubernetes manifests for
/dev/shm problems (the SHM rules), and repair them with ``--fix``; `shmguard rules` and
`shmguard rule CODE` print the rule catalogue (ENV and SHM).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shmguard.cli._common import error_line, fail, info_line, settings, size_option
from shmguard.model import FailOn
from shmguard.sources.read import READ_TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from shmguard.config import Config
    from shmguard.lint.baseline import Baseline
    from shmguard.lint.check import CheckOptions
    from shmguard.lint.report import CheckReport


class OutputFormat(str, enum.Enum):
    """``check --format``: text for people, JSON (``shmguard.check/1``), SARIF 2.1.0, or
    GitHub Actions workflow commands (annotations)."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    GITHUB = "github"


def _codes(values: list[str] | None) -> tuple[str, ...]:
    return tuple(c.strip().upper() for v in values or () for c in v.split(",") if c.strip())


def check(
    paths: list[str] | None = None,
    json_out: bool = False,
    output_format: OutputFormat | None = None,
    baseline: Path | None = None,
    create_baseline: Path | None = None,
    fail_on: FailOn | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    fix: bool = False,
    diff: bool = False,
    unsafe_fixes: bool = False,
    shm_size: str | None = None,
    target: str | None = None,
    cluster: bool = False,
    context: str | None = None,
    namespace: str | None = None,
    all_namespaces: bool = False,
    jobs: int = 0,
    exclude: list[str] | None = None,
    extend_exclude: list[str] | None = None,
    force_exclude: bool = False,
    read_timeout: float = READ_TIMEOUT,
    config: Path | None = None,
) -> int:
    """``shmguard check`` with its options parsed (by Typer, cli/_check_command.py, or by the
    console entry point's fast path, cli/_fast.py): check, print, and return the exit status
    (0, 1); exit 2 (``typer.Exit``) on a usage error or a file that could not be read."""
    from shmguard.lint.check import CheckOptions

    size = size_option(shm_size, "--shm-size")
    conf = _configured(config, select, ignore)
    paths = paths or []
    _check_sources(paths, cluster, (context, namespace, all_namespaces), fix or diff, fix)
    fail_on = fail_on or conf.fail_on or FailOn.WARNING
    if json_out and output_format not in (None, OutputFormat.JSON):
        fail(f"--json and --format {output_format.value} ask for two outputs; give one")
    fmt = OutputFormat.JSON if json_out else output_format or OutputFormat.TEXT
    known = _read_baseline(baseline)
    options = CheckOptions(policy=conf.policy, shm_size=size, target=_target(conf.target, target))
    make = create_baseline is not None
    if cluster:
        scope = (context, namespace, all_namespaces)
        report = _check_cluster(scope, options, conf, fail_on, known, make)
    else:
        from shmguard.lint.report import check_paths
        from shmguard.lint.workers import WorkerLost

        try:
            report = check_paths(
                paths,
                config=conf,
                options=options,
                fail_on=fail_on,
                fix=fix,
                diff=diff,
                unsafe=unsafe_fixes,
                jobs=jobs,
                baseline=known,
                create_baseline=make,
                keep_sources=fmt is OutputFormat.SARIF,
                skip=[p for p in (baseline, create_baseline) if p is not None],
                exclude=exclude,
                extend_exclude=extend_exclude or (),
                force_exclude=force_exclude or None,
                read_timeout=read_timeout,
            )
        except WorkerLost as err:
            fail(str(err))
    for c in report.files:
        if c.write_error is not None:
            error_line(c.write_error)
    if create_baseline is not None:
        _write_baseline(create_baseline, report)
    _output(fmt, report, conf)
    return report.exit_status


def _configured(config: Path | None, select: list[str] | None, ignore: list[str] | None) -> Config:
    """The configuration read (``--config``, else the nearest), with ``--select`` and
    ``--ignore`` over its own; exit 2 on a code no rule has."""
    from shmguard.config import Config, code_problem
    from shmguard.lint.config import RULES
    from shmguard.lint.engine import unknown_codes

    conf = settings(config)
    sel, ign = _codes(select), _codes(ignore)
    every = (*RULES, *conf.checks)
    have = f"check has {RULES[0].code}-{RULES[-1].code}"
    have += "".join(f", {r.code}" for r in conf.checks) + ": shmguard rules lists them"
    for flag, given in (("--select", sel), ("--ignore", ign)):
        problem = next((p for p in map(code_problem, given) if p is not None), None)
        if problem is not None:
            fail(f"{flag}: {problem}")
        bad = unknown_codes(Config(select=given), every, every_family=True)
        if bad:
            fail(f"{flag}: {', '.join(bad)}: no such rule ({have})")
    bad = unknown_codes(conf, every)
    if bad:
        fail(f"{conf.path}: {', '.join(bad)}: no such rule ({have})")
    return dataclasses.replace(conf, select=sel or conf.select, ignore=(*conf.ignore, *ign))


def _check_sources(
    paths: list[str],
    cluster: bool,
    scope: tuple[str | None, str | None, bool],
    edits: bool,
    fix: bool,
) -> None:
    """Exit 2 unless PATH... or --cluster (with its scope: --context, -n, -A) is given, and
    --fix or --diff (``edits``) go with files."""
    context, namespace, all_namespaces = scope
    if cluster and paths:
        fail("--cluster checks a cluster, not PATH...: give one or the other")
    if not cluster and not paths:
        fail("give PATH... (- for standard input) or --cluster")
    if not cluster and (context or namespace or all_namespaces):
        fail("--context, -n and -A go with --cluster")
    if namespace and all_namespaces:
        fail("-n and -A ask for one namespace and for all: give one")
    if cluster and edits:
        fail("--fix and --diff edit files; --cluster reads live objects")
    if fix and "-" in paths:
        fail("--fix cannot write to standard input; use --diff")


def _read_baseline(path: Path | None) -> Baseline | None:
    """The baseline file ``path`` read, or None; exit 2 when it cannot be read."""
    if path is None:
        return None
    from shmguard.lint.baseline import BaselineError, parse_baseline

    try:
        return parse_baseline(path.read_text(encoding="utf-8"), str(path))
    except OSError as err:
        fail(f"{path}: cannot read the baseline: {err.strerror or err}")
    except (BaselineError, UnicodeDecodeError) as err:
        fail(str(err) if isinstance(err, BaselineError) else f"{path}: not UTF-8")


def _check_cluster(
    scope: tuple[str | None, str | None, bool],
    options: CheckOptions,
    conf: Config,
    fail_on: FailOn,
    known: Baseline | None,
    make: bool,
) -> CheckReport:
    """``check --cluster``'s report (exit 2 when the cluster cannot be read), its notes on
    stderr."""
    from shmguard.fleet.cluster import ClusterError
    from shmguard.fleet.cluster_check import check_cluster

    try:
        report = check_cluster(
            *scope, options, config=conf, fail_on=fail_on, baseline=known, create_baseline=make
        )
    except ClusterError as err:
        fail(str(err))
    for note in report.notes:
        _info(note)
    return report


def _write_baseline(path: Path, report: CheckReport) -> None:
    from shmguard.render.json_bodies import baseline_json

    try:
        path.write_text(baseline_json(report.new_baseline or ()) + "\n", encoding="utf-8")
    except OSError as err:
        fail(f"{path}: cannot write the baseline: {err.strerror or err}")


def _output(fmt: OutputFormat, report: CheckReport, conf: Config) -> None:
    """Print ``report`` in ``fmt`` (the rules for SARIF's catalogue: the built-in ones and
    the configuration's checks)."""
    if fmt is OutputFormat.SARIF:
        import json

        from shmguard.lint.config import RULES
        from shmguard.render.sarif import sarif_log

        log = sarif_log(report.results, (*RULES, *conf.checks), sources=report.sources)
        sys.stdout.write(json.dumps(log, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.GITHUB:
        from shmguard.render.github import annotation, diagnostic_annotation

        lines = [diagnostic_annotation(d) for r in report.results for d in r.diagnostics]
        lines += [annotation(f, r.path) for r in report.results for f in r.findings]
        sys.stdout.write("\n".join([*lines, _summary(report)]) + "\n")
    elif fmt is OutputFormat.JSON:
        from shmguard.render.json_bodies import check_json_pieces

        sys.stdout.writelines(check_json_pieces(report))  # never the whole text at once
        sys.stdout.write("\n")
    else:
        _text(report)


def _text(report: CheckReport) -> None:
    """The fixes written, the findings, the diffs and the summary on stdout; the files that
    could not be read on stderr."""
    from shmguard.render.check_text import (
        diagnostic_line,
        finding_lines,
        fixed_line,
        unified_diff,
    )

    for r in report.results:  # on stderr, before any output
        for d in r.diagnostics:
            if d.info:
                _info(diagnostic_line(d))
            else:
                error_line(diagnostic_line(d, level=False))

    def lines() -> Iterator[str]:
        yield from (fixed_line(f) for f in report.repaired)
        for r in report.results:
            for f in r.findings:
                yield from finding_lines(f)
        for c in report.files:
            if c.fixed_data is not None:
                yield unified_diff(c.result.path, c.data or b"", c.fixed_data)
        yield _summary(report)

    # line by line: the lines of 96k findings are never held at once
    sys.stdout.writelines(line.rstrip("\n") + "\n" for line in lines())


def _summary(report: CheckReport) -> str:
    from shmguard.render.check_text import summary_line

    found, files = report.findings, len(report.files)
    return summary_line(
        found,
        files,
        report.fixed,
        report.baselined,
        written=report.written,
        skipped=report.skipped_counts,
        unread=report.errors,
    )


def _target(configured: str, given: str | None) -> Any:
    from shmguard.model.target import parse_target

    try:
        return parse_target(given or "", parse_target(configured))
    except ValueError as e:
        fail(f"--target: {e}")


def _info(line: str) -> None:
    info_line(line)

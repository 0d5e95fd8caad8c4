"""`shmguard check`: lint docker/podman run lines, Compose files and Kubernetes manifests for
/dev/shm problems (the SHM rules), and repair them with ``--fix``; `shmguard rules` and
`shmguard rule CODE` print the rule catalogue (ENV and SHM).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shmguard.cli._app import PlainUsage, app
from shmguard.cli._check_files import check_files, jobs_for
from shmguard.cli._common import error_line, fail, info_line, size_option
from shmguard.cli._config import ConfigOption, settings
from shmguard.model import FailOn

if TYPE_CHECKING:
    from shmguard.model.finding import Finding


class OutputFormat(str, enum.Enum):
    """``check --format``: text for people, JSON (``shmguard.check/1``), SARIF 2.1.0, or
    GitHub Actions workflow commands (annotations)."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    GITHUB = "github"


def _codes(values: list[str] | None) -> tuple[str, ...]:
    return tuple(c.strip().upper() for v in values or () for c in v.split(",") if c.strip())


@app.command(cls=PlainUsage)
def check(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH...",
            help="Files or directories (walked, .gitignore respected) to check; - reads "
            "standard input (helm template ... | shmguard check -, kubectl get -A -o yaml "
            "| shmguard check -).",
            show_default=False,
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the shmguard.check/1 JSON document (--format json)."),
    ] = False,
    output_format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            case_sensitive=False,
            help="Output: text, json (shmguard.check/1), sarif (SARIF 2.1.0, for code "
            "scanning) or github (::error file=...,line=... annotations for GitHub Actions) "
            "[default: text].",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="FILE",
            help="Report (and count in the exit status) only findings not in this baseline "
            "file (written by --create-baseline).",
        ),
    ] = None,
    create_baseline: Annotated[
        Path | None,
        typer.Option(
            "--create-baseline",
            metavar="FILE",
            help="Write the current findings to FILE as a baseline; this run then reports "
            "none of them.",
        ),
    ] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            case_sensitive=False,
            help="Exit 1 when a finding at or above this severity remains "
            "[default: the configuration's fail-on, else warning].",
            show_default=False,
        ),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            metavar="CODES",
            help="Report only these codes or prefixes (comma-separated; replaces the "
            "configuration's select).",
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            metavar="CODES",
            help="Never report these codes or prefixes (added to the configuration's ignore).",
        ),
    ] = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="Apply safe fixes to the files, in place.")
    ] = False,
    diff: Annotated[
        bool,
        typer.Option("--diff", help="Print the fixes as a unified diff; write nothing."),
    ] = False,
    unsafe_fixes: Annotated[
        bool,
        typer.Option("--unsafe-fixes", help="With --fix or --diff, apply unsafe fixes too."),
    ] = False,
    shm_size: Annotated[
        str | None,
        typer.Option(
            "--shm-size",
            metavar="SIZE",
            help="The /dev/shm size fixes write (64m, 1g, 2Gi) [default: the "
            "shmguard.io/shm-size annotation, else the sizing policy's 1 GiB, capped by a "
            "memory limit].",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            metavar="TOOLS",
            help="The tools the files are for, e.g. docker-cli=28,compose=v2|v1|podman-compose,"
            "podman=4.3 (any subset) [default: the configuration's target, else "
            "docker-cli=28,compose=v2,podman=4.3]; findings that depend on it name it.",
            show_default=False,
        ),
    ] = None,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="Check the live objects of a cluster (the kubeconfig's current context, or "
            "in-cluster) instead of files; needs the cluster extra.",
        ),
    ] = False,
    context: Annotated[
        str | None,
        typer.Option("--context", metavar="NAME", help="With --cluster: the kubeconfig context."),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "-n",
            "--namespace",
            metavar="NS",
            help="With --cluster: this namespace [default: the context's].",
            show_default=False,
        ),
    ] = None,
    all_namespaces: Annotated[
        bool,
        typer.Option("-A", "--all-namespaces", help="With --cluster: every namespace."),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=0,
            metavar="N",
            help="Check the files in N processes, this one included (Linux; the output is the "
            "same); 1: one at a time; 0: one per usable CPU, at most one per 64 files. --fix, "
            "and - (standard input), check one at a time.",
        ),
    ] = 0,
    config: ConfigOption = None,
) -> None:
    """Check config files (or, with --cluster, a live cluster's objects) for /dev/shm
    problems; exit 1 on findings at --fail-on or above, 2 when a file could not be read.

    Suppress a finding with a `# shmguard: ignore[SHM001]` comment on its line or the line
    above, or a `shmguard.io/ignore: "SHM001"` annotation (Kubernetes) or label (Compose)."""
    from shmguard.config import Config, code_problem
    from shmguard.lint.baseline import Baseline, BaselineError, entries, parse_baseline
    from shmguard.lint.check import CheckOptions
    from shmguard.lint.config import RULES
    from shmguard.lint.engine import unknown_codes
    from shmguard.model import exit_status
    from shmguard.render.check_text import (
        diagnostic_line,
        finding_lines,
        fixed_line,
        summary_line,
    )
    from shmguard.sources.discover import discover

    size = size_option(shm_size, "--shm-size")
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
    conf = dataclasses.replace(conf, select=sel or conf.select, ignore=(*conf.ignore, *ign))
    paths = paths or []
    if cluster and paths:
        fail("--cluster checks a cluster, not PATH...: give one or the other")
    if not cluster and not paths:
        fail("give PATH... (- for standard input) or --cluster")
    if not cluster and (context or namespace or all_namespaces):
        fail("--context, -n and -A go with --cluster")
    if namespace and all_namespaces:
        fail("-n and -A ask for one namespace and for all: give one")
    if cluster and (fix or diff):
        fail("--fix and --diff edit files; --cluster reads live objects")
    if fix and "-" in paths:
        fail("--fix cannot write to standard input; use --diff")
    fail_on = fail_on or conf.fail_on or FailOn.WARNING
    if json_out and output_format not in (None, OutputFormat.JSON):
        fail(f"--json and --format {output_format.value} ask for two outputs; give one")
    fmt = OutputFormat.JSON if json_out else output_format or OutputFormat.TEXT
    known: Baseline | None = None
    if baseline is not None:
        try:
            known = parse_baseline(baseline.read_text(encoding="utf-8"), str(baseline))
        except OSError as err:
            fail(f"{baseline}: cannot read the baseline: {err.strerror or err}")
        except (BaselineError, UnicodeDecodeError) as err:
            fail(str(err) if isinstance(err, BaselineError) else f"{baseline}: not UTF-8")
    options = CheckOptions(policy=conf.policy, shm_size=size, target=_target(conf.target, target))
    results = []
    sources: dict[str, bytes] = {}
    errors = 0
    fixed = 0
    repaired: list[Finding] = []
    diffs: list[str] = []
    own = [p for p in (baseline, create_baseline) if p is not None]
    if cluster:
        from shmguard.fleet.cluster import ClusterError, read_cluster
        from shmguard.fleet.cluster_check import check_objects

        try:
            snap = read_cluster(context, namespace, all_namespaces)
        except ClusterError as err:
            fail(str(err))
        for note in snap.notes:
            _info(note)
        for result, data in check_objects(
            snap.objects, snap.context, snap.view, options, config=conf
        ):
            sources[result.path] = data
            results.append(result)
    files = list(discover(paths, skip=own))
    keep = baseline is not None or create_baseline is not None or fmt is OutputFormat.SARIF
    for one in check_files(
        files,
        options,
        conf,
        fix=fix,
        diff=diff,
        unsafe=unsafe_fixes,
        jobs=jobs_for(jobs, files, fix=fix),
        keep_data=keep,
    ):
        result = one.result
        fixed += one.fixed
        repaired += one.repaired
        if one.diff is not None:
            diffs.append(one.diff)
        errors += one.write_errors + sum(not d.info for d in result.diagnostics)
        if one.data is not None:
            sources[result.path] = one.data
        results.append(result)
    baselined = 0
    if create_baseline is not None:
        from shmguard.render.json import dumps as dump_json

        found = entries((r, sources.get(r.path, b"")) for r in results)
        try:
            create_baseline.write_text(
                dump_json("baseline", {"findings": found}) + "\n", encoding="utf-8"
            )
        except OSError as err:
            fail(f"{create_baseline}: cannot write the baseline: {err.strerror or err}")
        known = Baseline.of(found)
    if known is not None:
        kept = []
        for r in results:
            r, n = known.new_findings(r, sources.get(r.path, b""))
            baselined += n
            kept.append(r)
        results = kept
    findings = [f for r in results for f in r.findings]
    code = exit_status(findings, fail_on)
    if errors:
        code = 2
    if fmt is OutputFormat.SARIF:
        import json

        from shmguard.render.sarif import sarif_log

        log = sarif_log(results, every, sources=sources)
        sys.stdout.write(json.dumps(log, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.GITHUB:
        from shmguard.render.github import annotation, diagnostic_annotation

        lines = [diagnostic_annotation(d) for r in results for d in r.diagnostics]
        lines += [annotation(f, r.path) for r in results for f in r.findings]
        lines.append(summary_line(findings, len(results), fixed, baselined, written=not diff))
        sys.stdout.write("\n".join(lines) + "\n")
    elif fmt is OutputFormat.JSON:
        from shmguard.render.json import dumps

        counts = {s: sum(f.severity.value == s for f in findings) for s in _LEVELS}
        body = {
            "files": [
                {
                    "file": r.path,
                    "kind": r.kind,
                    "findings": r.findings,
                    "diagnostics": [dataclasses.asdict(d) for d in r.diagnostics],
                }
                for r in results
            ],
            "summary": {
                **counts,
                "files": len(results),
                "fixed": fixed,
                "baselined": baselined,
                "fail_on": fail_on,
                "exit_status": code,
                "config": str(conf.path) if conf.path is not None else None,
            },
        }
        sys.stdout.write(dumps("check", body) + "\n")
    else:
        out = [fixed_line(f) for f in repaired]
        for r in results:
            for d in r.diagnostics:
                (error_line if not d.info else _info)(diagnostic_line(d))
            for f in r.findings:
                out += finding_lines(f)
        out += diffs
        out.append(summary_line(findings, len(results), fixed, baselined, written=not diff))
        sys.stdout.write("\n".join(line.rstrip("\n") for line in out) + "\n")
    if code:
        raise typer.Exit(code)


def _target(configured: str, given: str | None) -> Any:
    from shmguard.model.target import parse_target

    try:
        return parse_target(given or "", parse_target(configured))
    except ValueError as e:
        fail(f"--target: {e}")


def _info(line: str) -> None:
    info_line(line)


_LEVELS = ("error", "warning", "info")


# Registered after `check`, so that --help lists rules and rule beside it.
from shmguard.cli import rules as _rules  # noqa: E402, F401

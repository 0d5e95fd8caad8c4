"""``shmguard recommend --prometheus URL``: each workload's /dev/shm size and memory limit from
the exporter's history in Prometheus.

Thin: parse arguments, call :func:`shmguard.monitor.rightsize.rightsize`, render
(:mod:`shmguard.render.rightsize_text`), write the patches, and apply the proposals to
``--manifests`` (:func:`shmguard.lint.proposal.apply_proposals`, rendered by
:mod:`shmguard.render.manifests_text`). Exit status: 0 with proposals, 2 for bad input, an
unreachable or non-Prometheus URL, no shmguard series in the window, or a manifest that could
not be read or written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shmguard.cli._app import app
from shmguard.cli._common import error_line, fail
from shmguard.cli._config import ConfigOption, settings

if TYPE_CHECKING:
    from shmguard.config import Config
    from shmguard.monitor.rightsize import RightsizeOptions, RightsizeReport


def _percentile(text: str) -> float:
    """``99``, ``99.9`` or ``99%`` -> 0.99, or exit 2 naming ``--percentile``."""
    raw = text.strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        fail(f"--percentile {text}: not a number (e.g. 99 or 99.9)")
    if not 0 < value < 100:
        fail(f"--percentile {text}: must be above 0 and below 100")
    return value / 100


@app.command()
def recommend(
    prometheus: str = typer.Option(
        ...,
        "--prometheus",
        metavar="URL",
        help="Prometheus's base URL (http://prometheus:9090) that scrapes shmguard exporter.",
    ),
    window: str = typer.Option(
        "7d",
        "--window",
        metavar="DURATION",
        help="How much history to read, in Prometheus's syntax (7d, 36h, 1h30m).",
    ),
    percentile: str = typer.Option(
        "99",
        "--percentile",
        metavar="PCT",
        help="The quantile of used bytes shown beside the peak (sizing uses the peak).",
    ),
    min_samples: int = typer.Option(
        100,
        "--min-samples",
        metavar="N",
        min=1,
        help="Samples a workload needs; under it: 'not enough history' and no patch.",
    ),
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", metavar="NS", help="Only this namespace's workloads."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the shmguard.recommend/1 JSON."),
    patches_dir: str | None = typer.Option(
        None,
        "--patches",
        metavar="DIR",
        help="Write a strategic merge patch per workload into DIR (kubectl patch --patch-file; "
        "kubectl patch --local -f MANIFEST for a manifest).",
    ),
    manifests: Annotated[
        list[str] | None,
        typer.Option(
            "--manifests",
            metavar="PATH",
            help="Kubernetes manifests (files or directories; repeatable) to set each "
            "recommended workload's /dev/shm and memory limit in, with check --fix's edits; "
            "shows what would change unless --fix or --diff.",
        ),
    ] = None,
    fix: bool = typer.Option(False, "--fix", help="With --manifests: write the changes."),
    diff: bool = typer.Option(
        False,
        "--diff",
        help="With --manifests: print the changes as a unified diff; write nothing.",
    ),
    config: ConfigOption = None,
) -> None:
    """Propose each workload's /dev/shm size and memory limit from the exporter's peaks in
    Prometheus, through the sizing policy (as krr and the Vertical Pod Autoscaler do for CPU
    and memory).

    Workloads come from kube-state-metrics' kube_pod_owner when Prometheus has it, else from
    the pod names. With --manifests, the proposals are written into the manifests by check
    --fix's own edits (--fix writes, --diff shows a diff). Exit status: 0 proposals made; 2 bad
    input, Prometheus unreachable or not answering as Prometheus, no shmguard series in the
    window, or a manifest that could not be read or written. See docs/recommend.md.
    """
    from shmguard.monitor.prom import PromError, parse_prom_duration
    from shmguard.monitor.rightsize import RightsizeOptions, rightsize

    patches = None if patches_dir is None else Path(patches_dir)
    if (fix or diff) and not manifests:
        fail(f"{'--fix' if fix else '--diff'} goes with --manifests PATH (the files to change)")
    for m in manifests or ():
        if m == "-":
            fail("--manifests -: standard input cannot be changed; give files or directories")
        if not Path(m).exists():
            fail(f"--manifests {m}: no such file or directory")
    try:
        span = parse_prom_duration(window)
    except ValueError as err:
        fail(f"--window: {err}")
    if span < 60:
        # two samples at most of an exporter scraped every 15-30 s: no history to size from
        fail(f"--window {window.strip()}: at least 1m; right-sizing reads history (7d is typical)")
    share = _percentile(percentile)
    conf = settings(config)
    if patches is not None and patches.exists() and not patches.is_dir():
        fail(f"--patches {patches}: not a directory")
    options = RightsizeOptions(
        window=span,
        window_text=window.strip(),
        percentile=share,
        min_samples=min_samples,
        namespace=namespace,
        policy=conf.policy,
    )
    try:
        report = rightsize(prometheus, options)
    except ValueError as err:
        fail(f"--prometheus: {err}")
    except PromError as err:
        fail(f"--prometheus: {err}")
    mode = "diff" if diff else "fix" if fix else "show"
    _output(report, options, json_out, patches, (manifests or [], mode, conf))


def _output(
    report: RightsizeReport,
    options: RightsizeOptions,
    json_out: bool,
    patches: Path | None,
    manifests: tuple[list[str], str, Config],
) -> None:
    from shmguard.render.rightsize_text import (
        basis_lines,
        rightsize_table,
        workload_patches,
    )

    files: dict[tuple[str, str], str] = {}
    skipped: dict[tuple[str, str], str] = {}
    if patches is not None:
        made, skipped = workload_patches(report)
        try:
            patches.mkdir(parents=True, exist_ok=True)
            for p in made:
                (patches / p.name).write_text(p.text)
                for key in p.covers:
                    files[key] = str(patches / p.name)
        except OSError as err:
            fail(f"--patches {patches}: {err.strerror or err}")
    edited = _manifests(report, *manifests) if manifests[0] else None
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import recommend_body

        body = recommend_body(report, options, files, edited.data if edited is not None else None)
        if sys.stdout is not None:
            sys.stdout.write(dumps("recommend", body) + "\n")
        if edited is not None and edited.errors:
            raise typer.Exit(2)
        return
    from shmguard.cli._common import console
    from shmguard.render.escape import printable
    from shmguard.render.parts import print_whole

    out = console()
    print_whole(out, rightsize_table(report, options.percentile))
    for line in basis_lines(report):
        out.print(line)
    if patches is not None:
        for path in dict.fromkeys(files.values()):
            out.print(f"wrote {printable(str(path))}")
        for (name, container), why in skipped.items():
            out.print(printable(f"no patch for {name} {container or '-'}: {why}"))
    if edited is not None:
        if sys.stdout is not None and edited.text:
            sys.stdout.write(edited.text)
        if edited.errors:
            raise typer.Exit(2)


@dataclass(frozen=True)
class _Edited:
    """``--manifests``' outcome: its lines (and diffs), its JSON member, files not read or
    not written."""

    text: str
    data: dict[str, object]
    errors: int


def _manifests(report: RightsizeReport, paths: list[str], mode: str, conf: Config) -> _Edited:
    """Apply the report's proposals to the manifests of ``paths`` (written with --fix); what
    check finds left after it follows the configuration ``conf`` (select, ignore, policy)."""
    from dataclasses import replace

    from shmguard.lint.check import CheckOptions, write_atomic
    from shmguard.lint.proposal import apply_proposals
    from shmguard.monitor.manifests import manifest_files, proposals
    from shmguard.render.check_text import diagnostic_line, unified_diff
    from shmguard.render.json_bodies import manifests_body
    from shmguard.render.manifests_text import manifest_lines
    from shmguard.sources.diagnostics import SourceDiagnostic
    from shmguard.sources.read import read_input

    wanted, skipped = proposals(report.workloads)
    check_options = CheckOptions(policy=conf.policy)
    results, diffs, errors = [], {}, 0
    for path in manifest_files(paths):
        data = read_input(path)  # the one bounded reader, as check's
        if isinstance(data, SourceDiagnostic):
            error_line(f"--manifests {path}: {data.message}")
            errors += 1
            continue
        r = apply_proposals(data, path, wanted, check_options, config=conf)
        for d in r.diagnostics:
            if d.info:
                if sys.stderr is not None:
                    sys.stderr.write(f"shmguard: {diagnostic_line(d)}\n")
            else:
                error_line(diagnostic_line(d, level=False))
                errors += 1
        if r.data != data and mode == "diff":
            diffs[path] = unified_diff(path, data, r.data)
        elif r.data != data and mode == "fix":
            try:
                write_atomic(path, r.data)
            except OSError as err:
                why = err.strerror or str(err)
                error_line(f"--manifests {path}: cannot write: {why}")
                errors += 1
                # its changes are said as not made (the file does hold the workloads)
                made = tuple(f"{m} (not applied: cannot write the file: {why})" for m in r.applied)
                r = replace(r, data=data, applied=(), not_applied=made + r.not_applied)
        results.append(r)
    lines = manifest_lines(results, wanted, skipped, mode)
    text = "".join(diffs.values()) + "".join(line + "\n" for line in lines)
    body = manifests_body(results, wanted, skipped, mode == "fix", diffs if diffs else None)
    return _Edited(text, body, errors)

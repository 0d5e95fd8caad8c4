"""``shmguard recommend --prometheus URL``: each workload's /dev/shm size and memory limit from
the exporter's history in Prometheus.

Thin: parse arguments, call :func:`shmguard.monitor.rightsize.rightsize`, render
(:mod:`shmguard.render.rightsize_text`), write the patches. Exit status: 0 with proposals,
2 for bad input, an unreachable or non-Prometheus URL, or no shmguard series in the window.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from shmguard.cli._app import app
from shmguard.cli._common import fail
from shmguard.cli._config import ConfigOption, settings

if TYPE_CHECKING:
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
    config: ConfigOption = None,
) -> None:
    """Propose each workload's /dev/shm size and memory limit from the exporter's peaks in
    Prometheus, through the sizing policy (as krr and the Vertical Pod Autoscaler do for CPU
    and memory).

    Workloads come from kube-state-metrics' kube_pod_owner when Prometheus has it, else from
    the pod names. Exit status: 0 proposals made; 2 bad input, Prometheus unreachable or not
    answering as Prometheus, or no shmguard series in the window. See docs/recommend.md.
    """
    from shmguard.monitor.prom import PromError, parse_prom_duration
    from shmguard.monitor.rightsize import RightsizeOptions, rightsize

    patches = None if patches_dir is None else Path(patches_dir)
    try:
        span = parse_prom_duration(window)
    except ValueError as err:
        fail(f"--window: {err}")
    if span < 60:
        # two samples at most of an exporter scraped every 15-30 s: no history to size from
        fail(f"--window {window.strip()}: at least 1m; right-sizing reads history (7d is typical)")
    share = _percentile(percentile)
    if patches is not None and patches.exists() and not patches.is_dir():
        fail(f"--patches {patches}: not a directory")
    options = RightsizeOptions(
        window=span,
        window_text=window.strip(),
        percentile=share,
        min_samples=min_samples,
        namespace=namespace,
        policy=settings(config).policy,
    )
    try:
        report = rightsize(prometheus, options)
    except ValueError as err:
        fail(f"--prometheus: {err}")
    except PromError as err:
        fail(f"--prometheus: {err}")
    _output(report, options, json_out, patches)


def _output(
    report: RightsizeReport, options: RightsizeOptions, json_out: bool, patches: Path | None
) -> None:
    from shmguard.render.rightsize_text import (
        basis_lines,
        rightsize_data,
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
    if json_out:
        from shmguard.render.json import dumps

        extra = {"percentile": options.percentile, "min_samples": options.min_samples}
        if sys.stdout is not None:
            sys.stdout.write(dumps("recommend", rightsize_data(report, extra, files)) + "\n")
        return
    from shmguard.cli._common import console

    out = console()
    out.print(rightsize_table(report, options.percentile))
    for line in basis_lines(report):
        out.print(line)
    if patches is not None:
        for path in dict.fromkeys(files.values()):
            out.print(f"wrote {path}")
        for (name, container), why in skipped.items():
            out.print(f"no patch for {name} {container or '-'}: {why}")

"""``shmguard plan``: predict a DataLoader's /dev/shm need from its parameters and size for it.

Thin: parse arguments, call :mod:`shmguard.estimate.plan`, render, exit. Exit status: 0, or 1
when ``--check`` finds that the predicted peak does not fit in this /dev/shm's free space (or
``--max-workers`` finds that no worker fits), 2 for bad input.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, fail, size_option
from shmguard.cli._config import ConfigOption, settings


class _Format(str, Enum):
    text = "text"
    json = "json"
    docker = "docker"
    compose = "compose"
    k8s = "k8s"


#: ``--format`` -> the snippet renderer's runtime name.
_RUNTIME = {"docker": "docker", "compose": "compose", "k8s": "kubernetes"}
SHM = "/dev/shm"


def _at_least(value: int | None, low: int, flag: str) -> None:
    if value is not None and value < low:
        fail(f"{flag}: must be >= {low}, got {value}")


def _out(line: str) -> None:
    """Print one line on stdout, unless stdout is closed (``>&-``: Python's ``sys.stdout`` is
    None), where only the exit status is wanted."""
    if sys.stdout is not None:
        sys.stdout.write(line + "\n")


def _free_shm() -> tuple[int, int | None]:
    """(free, total) bytes of this machine's /dev/shm (statvfs ``f_bavail``); (0, None) when
    there is no /dev/shm at all (a DataLoader with workers fails there, as ``run --require``
    says); exit 2 when the free space cannot be known (``size=0`` tmpfs, ramfs: no limit)."""
    from shmguard.inspect.shm import read_own_shm

    facts = read_own_shm(Path(SHM))
    if facts.exists.value is False:
        return 0, None
    if facts.free.value is None:
        fail(f"cannot read the free space of {SHM}: {facts.free.reason}")
    return facts.free.value, facts.total.value


@app.command()
def plan(
    batch_size: int | None = typer.Option(None, "--batch-size", help="Samples per batch."),
    sample_shape: str | None = typer.Option(
        None, "--sample-shape", metavar="D,D,...", help="One sample's shape, e.g. 3,224,224."
    ),
    dtype: str | None = typer.Option(
        None,
        "--dtype",
        help="The sample's dtype (torch or numpy) [default: float32].",
        show_default=False,
    ),
    num_workers: int | None = typer.Option(
        None, "--num-workers", help="DataLoader num_workers (required unless --max-workers)."
    ),
    prefetch_factor: int = typer.Option(2, "--prefetch-factor", help="Batches per worker."),
    pin_memory: bool = typer.Option(False, "--pin-memory", help="DataLoader(pin_memory=True)."),
    persistent_workers: bool = typer.Option(
        False, "--persistent-workers", help="DataLoader(persistent_workers=True)."
    ),
    drops_batch: bool = typer.Option(
        False, "--drops-batch", help="The loop ends with `del batch` (no transient extra batch)."
    ),
    local_ranks: int = typer.Option(
        1, "--local-ranks", help="Processes on the node running this loader (one per GPU)."
    ),
    loaders: int = typer.Option(
        1, "--loaders", help="DataLoader iterators alive at once per rank."
    ),
    batch_bytes: str | None = typer.Option(
        None,
        "--batch-bytes",
        metavar="SIZE",
        help="One collated batch's size, instead of --batch-size/--sample-shape/--dtype.",
    ),
    model_peak: str | None = typer.Option(
        None,
        "--model-peak",
        metavar="SIZE",
        help="The job's peak memory without /dev/shm, for a memory limit.",
    ),
    margin: str | None = typer.Option(
        None,
        "--margin",
        metavar="SIZE",
        help="Least memory kept beside model peak and shm [default: the configuration's "
        "sizes.memory-margin, else 1 GiB; 25% of the model peak when larger].",
        show_default=False,
    ),
    fmt: Annotated[
        _Format, typer.Option("--format", help="Output: text, json, or one runtime's snippet.")
    ] = _Format.text,
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when the predicted peak exceeds this /dev/shm's free space."
    ),
    max_workers: bool = typer.Option(
        False, "--max-workers", help="Say how many workers fit in this /dev/shm's free space."
    ),
    config: ConfigOption = None,
) -> None:
    """Predict a DataLoader's /dev/shm steady level and peak, and the sizes to ship.

    Give the batch as --batch-size, --sample-shape and --dtype (a default-collated
    (sample, label) batch), or as --batch-bytes. Exit status: 0; 1 when --check finds it does
    not fit (or --max-workers finds that no worker fits); 2 for bad input.
    """
    from dataclasses import replace

    from shmguard.estimate.plan import (
        PlanRequest,
        PlanTooLarge,
        check_fit,
        make_plan,
        parse_shape,
        too_large_by,
    )

    for value, low, flag in (
        (batch_size, 1, "--batch-size"),
        (num_workers, 0, "--num-workers"),
        (prefetch_factor, 1, "--prefetch-factor"),
        (local_ranks, 1, "--local-ranks"),
        (loaders, 1, "--loaders"),
    ):
        _at_least(value, low, flag)
    if num_workers is None and not max_workers:
        fail("--num-workers: required (or ask --max-workers)")
    shape = None
    if sample_shape is not None:
        try:
            shape = parse_shape(sample_shape)
        except ValueError as err:
            fail(f"--sample-shape: {err}")
    nbytes = size_option(batch_bytes, "--batch-bytes")
    peak = size_option(model_peak, "--model-peak")
    room = size_option(margin, "--margin")
    if nbytes is not None and (batch_size is not None or shape is not None):
        fail("--batch-bytes: give it instead of --batch-size and --sample-shape, not with them")
    if nbytes is None and (batch_size is None or shape is None):
        missing = "--batch-size" if batch_size is None else "--sample-shape"
        fail(f"{missing}: required (give --batch-size and --sample-shape, or --batch-bytes)")
    if nbytes is not None and dtype is not None:
        fail(
            "--dtype: describes --sample-shape's elements; with --batch-bytes give the batch's "
            "bytes only"
        )
    if dtype is None:
        dtype = "float32"
    if nbytes is None:
        from shmguard.estimate.dataloader import DTYPE_BYTES

        name = dtype.lower().removeprefix("torch.").removeprefix("np.")
        if name not in DTYPE_BYTES:
            fail(f"--dtype: unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    if (check or max_workers) and fmt in (_Format.docker, _Format.compose, _Format.k8s):
        fail(
            f"--format {fmt.value}: prints a snippet only; use text or json with --check or "
            "--max-workers"
        )
    policy = settings(config).policy
    if room is not None:
        policy = replace(policy, memory_margin=room)
    request = PlanRequest(
        num_workers=num_workers if num_workers is not None else 1,
        batch_size=batch_size if nbytes is None else None,
        sample_shape=shape if nbytes is None else None,
        dtype=dtype,
        batch_bytes=nbytes,
        prefetch_factor=prefetch_factor,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        drops_batch=drops_batch,
        local_ranks=local_ranks,
        loaders=loaders,
        model_peak=peak,
    )
    fit = workers = free = total = None
    if check or max_workers:
        free, total = _free_shm()
    if max_workers and free is not None:
        from shmguard.estimate.plan import workers_that_fit

        workers = workers_that_fit(request, free)
        if num_workers is None:  # the plan is then the one for the workers that fit
            request = replace(request, num_workers=max(workers, 1))
    try:
        result = make_plan(request, policy)
    except PlanTooLarge as err:
        if err.part == "memory":
            fail(f"--model-peak/--margin: the plan {err}")
        batch = "--batch-bytes" if nbytes is not None else "--batch-size/--sample-shape"
        parts = too_large_by(request, policy)
        flags = "/".join(batch if p == "batch" else "--" + p.replace("_", "-") for p in parts)
        r = request
        fail(
            f"{flags}: with {r.num_workers} worker(s) x prefetch {r.prefetch_factor} x "
            f"{r.local_ranks} rank(s) x {r.loaders} loader(s), the predicted peak {err}"
        )
    if check and free is not None:
        fit = check_fit(result, free, path=SHM, total=total)
    failed = (fit is not None and not fit.fits) or workers == 0
    if fmt in (_Format.docker, _Format.compose, _Format.k8s):
        from shmguard.fix.snippets import fix_snippets

        snips = fix_snippets(result, (_RUNTIME[fmt.value],))
        if not snips:
            fail("num_workers=0 uses no /dev/shm: there is no size to write", EXIT_FINDINGS)
        _out(snips[0].text)
        raise typer.Exit(EXIT_OK)
    if fmt is _Format.json:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import plan_body

        _out(dumps("plan", plan_body(result, fit, workers, free)))
    elif max_workers and num_workers is None:
        from shmguard.render.plan_text import max_workers_line

        assert workers is not None and free is not None
        _out(max_workers_line(workers, free, SHM, result))
    else:
        from shmguard.cli._runopts import _print
        from shmguard.render.plan_text import max_workers_line, plan_report

        _print(plan_report(result, fit))
        if workers is not None and free is not None:
            _out(max_workers_line(workers, free, SHM, result))
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)

"""``shmguard policy``: print (or write) the SHM rules as Kyverno, Gatekeeper or
ValidatingAdmissionPolicy objects. Thin: parse, call :mod:`shmguard.fleet.policy`, write."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._app import app
from shmguard.cli._common import fail
from shmguard.cli._config import ConfigOption, settings
from shmguard.fleet.engines import Engine, Mode


@app.command()
def policy(
    engine: Annotated[
        Engine,
        typer.Option(
            "--engine",
            case_sensitive=False,
            help="kyverno (ClusterPolicy: CEL validate rules and a mutate rule adding a sized "
            "/dev/shm), gatekeeper (ConstraintTemplate in Rego and its Constraint) or vap "
            "(ValidatingAdmissionPolicy and Binding, Kubernetes 1.30+).",
        ),
    ],
    mode: Annotated[
        Mode,
        typer.Option(
            "--mode",
            case_sensitive=False,
            help="enforce (reject the pod), audit (record only; no Kyverno mutate rule) or "
            "warn (admission warnings, and recorded).",
        ),
    ] = Mode.WARN,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", help="Write to FILE instead of stdout."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Print the pod SHM rules (SHM001, 004, 006, 007, 008, 009, 023) as policies for a
    cluster's policy engine; sizes come from the sizing policy ([tool.shmguard.sizes])."""
    from shmguard.fleet.policy import generate

    text = generate(engine, mode, settings(config).policy)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        fail(f"--output {output}: cannot write: {err.strerror or err}")

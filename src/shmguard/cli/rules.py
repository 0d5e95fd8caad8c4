"""``shmguard rules`` and ``shmguard rule CODE``: the rule catalogue (doctor's ENV rules,
check's SHM rules and the configuration's user-defined checks)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shmguard.cli._app import PlainUsage, app
from shmguard.cli._common import fail
from shmguard.cli._config import settings

if TYPE_CHECKING:
    from shmguard.lint.engine import Rule


def _every(config: Path | None) -> tuple[Rule[Any, Any], ...]:
    from shmguard.lint.config import RULES as SHM
    from shmguard.lint.env import RULES as ENV

    return (*ENV, *SHM, *settings(config).checks)


_CONFIG_HELP = (
    "Configuration file whose user-defined checks ([[checks]]) are listed too; default: the "
    "nearest one from the current directory up."
)


@app.command()
def rules(
    json_out: Annotated[bool, typer.Option("--json", help="Print the rules as JSON.")] = False,
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help=_CONFIG_HELP)
    ] = None,
) -> None:
    """List every rule: doctor's ENV rules, check's SHM rules and the configuration's
    user-defined checks (USR, marked user-defined)."""
    every = _every(config)
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import rules_body

        sys.stdout.write(dumps("rules", rules_body(every)) + "\n")
        return
    for r in every:
        mark = " (user-defined)" if r.code.startswith("USR") else ""
        sys.stdout.write(f"{r.code}  {r.name:<36} {r.severity.value:<8} {r.summary}{mark}\n")


@app.command(cls=PlainUsage)
def rule(
    code: Annotated[
        str,
        typer.Argument(
            metavar="CODE", help="A rule code (SHM001, ENV003, USR001).", show_default=False
        ),
    ],
    config: Annotated[
        Path | None, typer.Option("--config", metavar="FILE", help=_CONFIG_HELP)
    ] = None,
) -> None:
    """Print one rule's documentation (what, why, example, fix, fix safety); a user-defined
    check's is built from its configuration."""
    from shmguard.lint.docs import render_rules_markdown

    found = [r for r in _every(config) if r.code == code.strip().upper()]
    if not found:
        fail(f"{code}: no such rule (shmguard rules lists them)")
    text = render_rules_markdown(found, intro="")
    body = text.split("\n## ", 1)[1]
    sys.stdout.write("## " + body)

"""The Typer application object shared by every command module."""

from __future__ import annotations

from typing import Any

import typer
import typer.core

from shmguard._version import __version__


class PlainUsage(typer.core.TyperCommand):
    """A command whose usage line names required arguments plainly (``PATH...``, ``CODE``)
    rather than in Typer's braces (``{PATH...}``); optional ones keep their ``[...]``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """Click's usage pieces, with Typer's ``{...}`` around required arguments removed."""
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


app = typer.Typer(
    name="shmguard",
    help=(
        "Find, measure, fix and prevent /dev/shm exhaustion in containerized PyTorch jobs.\n\n"
        "find: doctor, explain.  fix: check, rules, rule.  "
        "measure: sandbox, measure, probe, demo.  predict: plan, tune.  "
        "prevent: run, watch, exporter, recommend.  fleet: webhook, policy."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"shmguard {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_version, is_eager=True
    ),
) -> None:
    """shmguard: /dev/shm for PyTorch in containers, sized and explained."""

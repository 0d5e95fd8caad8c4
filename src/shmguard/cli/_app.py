"""The Typer application object shared by every command module."""

from __future__ import annotations

import typer

from shmguard import __version__

app = typer.Typer(
    name="shmguard",
    help=(
        "Find, measure, fix and prevent /dev/shm exhaustion in containerized PyTorch jobs.\n\n"
        "find: doctor, explain.  fix: check, rules, rule.  "
        "measure: sandbox, measure, probe, demo."
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

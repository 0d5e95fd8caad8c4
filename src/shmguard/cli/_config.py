"""The configuration for a command: ``--config FILE`` or the nearest one, or exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._common import fail
from shmguard.config import Config, ConfigError
from shmguard.lint.settings import load_config

#: The ``--config FILE`` option of the commands that read the configuration.
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Configuration file (.shmguard.toml or a pyproject.toml with "
        "[tool.shmguard]); default: the nearest one from the current directory up.",
    ),
]


def settings(path: Path | None) -> Config:
    """:func:`shmguard.lint.settings.load_config` of ``path`` (``--config``) or of the current
    directory upward; a bad file exits 2 with its one-line error."""
    try:
        if path is not None and not path.exists():
            fail(f"--config {path}: no such file")
        if path is not None and path.is_dir():
            fail(f"--config {path}: is a directory, not a configuration file")
        return load_config(path=path)
    except ConfigError as err:
        fail(str(err))

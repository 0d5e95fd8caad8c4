"""The ``--config FILE`` option of the commands that read the configuration, and
:func:`~shmguard.cli._common.settings`, which reads it (or the nearest one), or exits 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._common import settings

__all__ = ["ConfigOption", "settings"]

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

"""A text report as parts: prose wraps at the console width, verbatim parts never do.

Commands and fix snippets are verbatim: printed with Rich's ``soft_wrap`` they are neither
wrapped nor cropped at the width (80 columns without a terminal, COLUMNS=40, a file), because a
command or a YAML snippet broken over two lines can no longer be pasted. Rich is imported only
for type checking: the renderers that build parts import it when they run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

#: A renderable and whether it is verbatim.
Part: TypeAlias = "tuple[RenderableType, bool]"


def print_parts(console: Console, parts: Iterable[Part]) -> None:
    """Print parts on ``console``; verbatim ones with ``soft_wrap`` (never wrapped or
    cropped)."""
    for renderable, verbatim in parts:
        print_whole(console, renderable, soft_wrap=verbatim)


def print_whole(console: Console, renderable: RenderableType, *, soft_wrap: bool = False) -> None:
    """Print ``renderable``; off a terminal (a pipe, a file, a CI log) with no ``COLUMNS``
    set, a table gets the width it needs instead of Rich's 80 columns, which shrink its
    wrappable columns to nothing (a ``recommend`` table piped to ``cat`` lost its workload and
    history columns)."""
    from rich.table import Table

    width = console.width
    if isinstance(renderable, Table) and not console.is_terminal and "COLUMNS" not in os.environ:
        from rich.measure import Measurement

        options = console.options.update_width(10_000)
        console.width = max(width, Measurement.get(console, options, renderable).maximum)
    try:
        console.print(renderable, soft_wrap=soft_wrap)
    finally:
        console.width = width

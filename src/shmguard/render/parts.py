"""A text report as parts: prose wraps at the console width, verbatim parts never do.

Commands and fix snippets are verbatim: printed with Rich's ``soft_wrap`` they are neither
wrapped nor cropped at the width (80 columns without a terminal, COLUMNS=40, a file), because a
command or a YAML snippet broken over two lines can no longer be pasted. Rich is imported only
for type checking: the renderers that build parts import it when they run.
"""

from __future__ import annotations

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
        console.print(renderable, soft_wrap=verbatim)

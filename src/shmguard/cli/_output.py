"""The one output layer: every Rich console a command prints on is made here (issue 23 item 5).

What is printed off a terminal (a pipe, a file, a CI log) is pasted into issues and chat, so:

- no trailing spaces: Rich pads every table row (and a panel's lines) to the table's width;
  :class:`_Unpadded` drops the spaces before each line end as the text is written (style codes
  there are kept);
- prose is not wrapped unless ``COLUMNS`` says so: off a terminal without ``COLUMNS`` the console
  is :data:`UNBOUNDED` columns wide, so a paragraph is one line and a table takes the width it
  needs (Rich's default, 80 columns, wrapped paragraphs and squeezed tables); with ``COLUMNS``,
  or on a terminal, Rich wraps at that width;
- where it wraps, a size, a number with its unit and a short quoted message stay whole
  (:func:`shmguard.render.wrap.divide_line` takes the place of Rich's word splitter).

Colour only on a terminal, never with NO_COLOR (:func:`use_color`), judged for the stream
printed on.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

#: The width of a console off a terminal without ``COLUMNS``: no line of ours is this long, so
#: nothing is wrapped; a horizontal rule gets :func:`rule_width` instead.
UNBOUNDED = 10_000
#: Spaces (between style codes) before a line end.
_PADDED_END = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)*[ \t](?:\x1b\[[0-9;]*m)*\n")
_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def console(*, stderr: bool = False) -> Console:
    """A Rich console on standard output (or standard error) as the module docstring says;
    imported lazily so ``--json`` paths skip Rich."""
    from rich.console import Console

    _install_divide_line()
    stream = sys.stderr if stderr else sys.stdout
    options: dict[str, Any] = {"highlight": False, "markup": False, "soft_wrap": False}
    options["stderr"] = stderr
    if no_color_requested():
        options["color_system"] = None
    else:
        options["no_color"] = not use_color(stream)
    if stream is not None and not _isatty(stream):  # (Rich writes nothing to a closed stream)
        options["file"] = _Unpadded(stderr)
        if "COLUMNS" not in os.environ:
            options["width"] = UNBOUNDED
    return Console(**options)


@functools.cache
def _install_divide_line() -> None:
    """Once: Rich's text wrapping calls ``rich.text.divide_line``; ours keeps sizes and quoted
    messages whole (tests/render/test_piped_output.py fails if Rich stops calling that name)."""
    import rich.text

    from shmguard.render.wrap import divide_line

    rich.text.divide_line = divide_line  # type: ignore[attr-defined]


def no_color_requested() -> bool:
    """True when NO_COLOR is present and not empty (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def use_color(stream: Any = None) -> bool:
    """Colour only on a terminal and never when NO_COLOR is requested; ``stream`` is the one
    printed on (standard output when not given)."""
    return not no_color_requested() and _isatty(sys.stdout if stream is None else stream)


def _isatty(stream: Any) -> bool:
    """True for an open terminal; a closed stream (``>&-``, seen as None) is not one."""
    return stream is not None and bool(stream.isatty())


def unbounded(out: Console) -> bool:
    """True when ``out`` does not wrap (off a terminal, no ``COLUMNS``)."""
    return out.width >= UNBOUNDED


def rule_width(out: Console, title: str) -> int:
    """The width to draw a horizontal rule titled ``title`` at: the console's, or off a
    terminal without ``COLUMNS``, 80 columns or the title's length and its frame, so the title
    is never cut with "…"."""
    from rich.cells import cell_len

    return max(80, cell_len(title) + 6) if unbounded(out) else out.width


class _Unpadded:
    """Standard output (or error) with the spaces before each line end left out. Spaces at the
    end of one write are held until the next shows whether a line end follows them. The
    stream is looked up at each write, as Rich does, so a test that swaps ``sys.stdout`` gets
    the text."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._held = ""

    def _stream(self) -> Any:
        return sys.stderr if self._stderr else sys.stdout

    def write(self, text: str) -> int:
        """Write ``text`` less its line-end padding; returns ``len(text)``."""
        body = _PADDED_END.sub(_keep_styles, self._held + text)
        kept = body.rstrip(" \t")
        self._held = body[len(kept) :]
        stream = self._stream()
        if kept and stream is not None:  # None: closed since (`>&-` seen by a later write)
            stream.write(kept)
        return len(text)

    def flush(self) -> None:
        """Flush the stream (held spaces stay held: they end a line or are dropped)."""
        stream = self._stream()
        if stream is not None:
            stream.flush()

    def isatty(self) -> bool:
        """False: this writer exists only off a terminal."""
        return False

    def fileno(self) -> int:
        """The stream's file descriptor."""
        return int(self._stream().fileno())

    @property
    def encoding(self) -> str:
        """The stream's encoding (Rich asks, to pick box characters)."""
        return str(getattr(self._stream(), "encoding", None) or "utf-8")


def _keep_styles(m: re.Match[str]) -> str:
    return "".join(_STYLE.findall(m.group(0))) + "\n"

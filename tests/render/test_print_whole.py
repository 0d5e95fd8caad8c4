"""Tables printed off a terminal keep every column whole (render.parts.print_whole)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from shmguard.render.parts import print_whole

ROW = (
    "ml/Deployment/train (dshm)",
    "trainer",
    "512 MiB -> 1.25 GiB (+768 MiB)",
    "12 samples from 2 pods over 4s of the 2m window (3%)",
)


def _table() -> Table:
    table = Table(title="/dev/shm right-sizing")
    table.add_column("workload", overflow="fold")
    table.add_column("container", no_wrap=True)
    table.add_column("memory limit", no_wrap=True)
    table.add_column("history", overflow="fold")
    table.add_row(*ROW)
    return table


def test_a_table_off_a_terminal_gets_the_width_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = Console(file=out, highlight=False)  # a file: not a terminal, 80 columns
    assert not console.is_terminal and console.width == 80
    print_whole(console, _table())
    text = out.getvalue()
    assert all(cell in text for cell in ROW)  # each on one line, none folded or cut
    assert max(len(line) for line in text.splitlines()) > 80
    assert console.width == 80  # restored for what is printed next
    # Rich alone squeezes the wrappable columns to nothing at 80 columns
    squeezed = io.StringIO()
    Console(file=squeezed, highlight=False).print(_table())
    assert ROW[0] not in squeezed.getvalue()


def test_columns_set_by_the_user_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    console = Console(file=out, highlight=False)
    print_whole(console, _table())
    assert max(len(line) for line in out.getvalue().splitlines()) <= 100

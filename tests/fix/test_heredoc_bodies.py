"""`check --fix` leaves here-document bodies alone (issue 24 item 8): a body is text fed to a
command, not a run line, so no finding and no edit there, whatever the form of the operator
(``0<<'EOT'`` put a file-descriptor number before it and the body was read as commands);
the run line after the body is still fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shmguard.cli import app

RUN = "docker run --gpus all pytorch/pytorch:2.3.0 python train.py"
OPENERS = [
    "cat <<'EOT' > run.sh",
    "cat 0<<'EOT' > run.sh",
    "cat 3<<'EOT'",
    'cat <<"EOT" | ssh host sh',
    "cat <<-'EOT'",
    "ssh host sh <<\\EOT",
]


@pytest.mark.parametrize("opener", OPENERS)
def test_fix_edits_the_run_line_after_a_heredoc_not_its_body(tmp_path: Path, opener: str) -> None:
    body = f"{RUN}\n"
    script = f"#!/bin/sh\n{opener}\n{body}EOT\n{RUN}\n"
    f = tmp_path / "go.sh"
    f.write_text(script)
    r = CliRunner().invoke(app, ["check", "--fix", str(f)])
    assert "1 fixed" in r.stdout, r.stdout
    assert "go.sh:5:" in r.stdout  # the run line after the body, line 5
    fixed = f.read_text()
    head, _, tail = fixed.partition("\nEOT\n")
    assert head == f"#!/bin/sh\n{opener}\n{RUN}"  # the body as it was
    assert tail != f"{RUN}\n" and "--shm-size" in tail

"""`check --fix` keeps a CR-only file's line ending (classic Mac OS; YAML reads a lone CR as a
line break; issue 24 item 8): before, the added lines ended in LF, and an edit meant for the
next line went to the end of the file. The fixed file is the LF file's fix with LF as CR."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shmguard.cli import app

POD = """apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    image: pytorch/pytorch:2.3.0
  restartPolicy: Never
"""
COMPOSE = """services:
  train:
    image: pytorch/pytorch:2.3.0
    command: python train.py
"""


@pytest.mark.parametrize("text", [POD, COMPOSE], ids=["pod", "compose"])
def test_fix_of_a_cr_only_file_writes_cr_lines_where_an_lf_file_gets_lf(
    tmp_path: Path, text: str
) -> None:
    lf, cr = tmp_path / "lf.yaml", tmp_path / "cr.yaml"
    lf.write_bytes(text.encode())
    cr.write_bytes(text.replace("\n", "\r").encode())
    for f in (lf, cr):
        r = CliRunner().invoke(app, ["check", "--fix", str(f)])
        assert "1 fixed" in r.stdout, r.stdout
    fixed = cr.read_bytes()
    assert b"\n" not in fixed
    assert fixed == lf.read_bytes().replace(b"\n", b"\r")
    assert fixed != text.replace("\n", "\r").encode()
    again = CliRunner().invoke(app, ["check", "--fix", str(cr)])
    assert "fixed" not in again.stdout.splitlines()[-1]
    assert cr.read_bytes() == fixed  # idempotent

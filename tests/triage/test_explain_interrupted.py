"""`explain` on an endless pipe (issue 24 item 8): SIGINT (Ctrl-C) or SIGTERM ends the reading
and prints the diagnosis of what was read so far, marked partial, then exits 128 + the signal.
Before, SIGINT printed only "interrupted" and SIGTERM nothing at all."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shmguard.triage import PARTIAL_NOTE, explain_streams

SRC = Path(__file__).resolve().parents[2] / "src"
LINE = (
    b"RuntimeError: DataLoader worker (pid 123) is killed by signal: Bus error. It is possible "
    b"that dataloader's workers are out of shared memory. Please try to raise your shared "
    b"memory limit.\n"
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_explain_prints_a_partial_diagnosis_when_signalled(sig: signal.Signals) -> None:
    read, write = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", "explain", "--json"],
        stdin=read,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(read)
    try:
        os.write(write, LINE * 50)  # then the pipe stays open: an endless input
        time.sleep(3)  # start-up and the lines read; the signal must come while it reads
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(write)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    doc = json.loads(out)
    body = doc.get("result", doc)
    assert PARTIAL_NOTE in body["notes"]
    assert any(r["id"] == "dataloader-bus-error" for r in body["results"]), body["results"]
    assert body["inputs"][0]["lines"] == 50
    assert f"interrupted by {sig.name}".encode() in err


class _Endless(io.RawIOBase):
    """Gives ``LINE`` ``before`` times, then raises KeyboardInterrupt (a Ctrl-C mid-read)."""

    def __init__(self, before: int) -> None:
        self.left = before

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        b[: len(LINE)] = LINE
        return len(LINE)


def test_the_library_raises_unless_asked_for_a_partial_diagnosis() -> None:
    with pytest.raises(KeyboardInterrupt):
        explain_streams([("s", _Endless(3))])  # type: ignore[list-item]
    d = explain_streams([("s", _Endless(3))], interruptible=True)  # type: ignore[list-item]
    assert d.notes[0] == PARTIAL_NOTE
    assert d.inputs[0].lines == 3
    assert d.results[0].id == "dataloader-bus-error"

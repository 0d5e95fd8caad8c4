"""benchmarks/explain_throughput.py's table says what its ratio is: explain's time over grep's,
which runs the other way from the MB/s beside it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "explain_throughput.py"


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_the_ratio_column_is_labelled_a_time_ratio(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "1M", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("size"))
    assert re.split(r"\s{2,}", header.strip()) == [
        "size",
        "explain MB/s",
        "grep MB/s",
        "explain/grep time",
        "explain peak RSS",
        "found",
    ]
    row = next(ln for ln in lines if ln.lstrip().startswith("1M"))
    explain_mbs, grep_mbs, ratio = (float(x.rstrip("x")) for x in row.split()[1:4])
    # Labelled a time ratio, the figure is grep's throughput over explain's (to the rounding
    # of the MB/s printed), not explain's over grep's.
    assert ratio == pytest.approx(grep_mbs / explain_mbs, rel=0.1, abs=0.06)
    assert row.split()[-1] == "yes"

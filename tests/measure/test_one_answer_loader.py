"""One loader, one size (issue 19, reproduction 1), through each command's own entry on real
runs: issue 19's loader (float32 3x256x256 samples, batch 32, 4 workers, a fast consumer: the
bundled grid_loader with ``--batch-mib 24``) gets from ``shmguard plan``, ``shmguard measure``
and ``shmguard probe`` (their JSON), from the guard (``check_dataloader`` before the workers
start and ``guard`` when the loop runs out, both inside a 64 MiB sandbox) and from ``shmguard
run --watch`` (its diagnosis of the same loader dying in a 64 MiB sandbox) the size plan
prints, and that size keeps the predicted steady level and peak under 80% (``watch``'s default
threshold and the ShmguardShmAlmostFull alert).

The fast consumer's measured peak depends on the run (192 or 216 MiB: the queues fill or not);
before issue 19 measure gave 256 MiB for a 192 MiB run and 320 MiB for a 216 MiB one. The
library-level twin, with tune and recommend, is tests/estimate/test_one_size.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmguard.estimate.policy import ALERT_PERCENT
from shmguard.units import format_iec

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
SHMGUARD = [sys.executable, "-m", "shmguard"]
LOADER = [
    sys.executable, "-m", "shmguard.examples.grid_loader", "--workers", "4", "--prefetch", "2",
    "--batch-mib", "24", "--batch-size", "32", "--dtype", "float32", "--consumer", "fast",
]  # fmt: skip
PLAN = ["--batch-size", "32", "--sample-shape", "3,256,256", "--dtype", "float32"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHMGUARD, *args], capture_output=True, text=True, timeout=180)


def _json(*args: str) -> dict[str, Any]:
    done = _run(*args)
    assert done.returncode in (0, 1), done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_every_command_gives_the_loader_the_size_plan_prints(
    root_only: None, no_leftovers: None
) -> None:
    plan = _json("plan", *PLAN, "--num-workers", "4", "--format", "json")
    size = plan["shm_size"]
    sizes: dict[str, int | str] = {"plan": size}
    measured = _json("measure", "--json", "--timeout", "120", "--", *LOADER)
    assert measured["exit_status"] == 0
    sizes["measure"] = measured["recommendation"]["shm_size"]
    probed = _json("probe", "--json", "--confirm", "1", "--", *LOADER)
    assert probed["minimum"] is not None
    sizes["probe"] = probed["recommendation"]["shm_size"]
    # the guard's entries inside a 64 MiB /dev/shm (the child prints on its stdout, which
    # measure --json passes to stderr)
    child = _run("measure", "--shm-size", "64m", "--json", "--timeout", "120", "--",
                 sys.executable, str(HERE / "one_answer_child.py"))  # fmt: skip
    said = dict(line.split(" ", 1) for line in child.stderr.splitlines()
                if line.startswith(("CHECK ", "GUARD ")))  # fmt: skip
    sizes["guard: check_dataloader"] = int(said["CHECK"])
    sizes["guard: guard"] = int(said["GUARD"])
    # run --watch diagnoses the loader dying in 64 MiB with the model for what it saw
    watched = _run("measure", "--shm-size", "64m", "--timeout", "120", "--",
                   *SHMGUARD, "run", "--watch", "--", *LOADER)  # fmt: skip
    text = watched.stdout + watched.stderr
    line = f"Size: {format_iec(size)}, the DataLoader model for the 4 worker(s) and 24 MiB"
    sizes["run --watch"] = size if line in text else text[-2000:]
    assert set(sizes.values()) == {size}, sizes
    # 320 MiB, and the steady level and the peak stay under the 80% alert relation
    pred = plan["prediction"]
    assert size == 320 * 2**20
    assert pred["steady"] * 100 <= size * ALERT_PERCENT
    assert pred["peak"] * 100 < size * ALERT_PERCENT

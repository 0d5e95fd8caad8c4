"""`shmguard run --watch` around real PyTorch 2.13 DataLoaders in a real 64 MiB tmpfs (the
sandbox gives the private /dev/shm a container would have): the seed's loader fails and the
diagnosis says why, with the loader's own exit status; a loader that always hangs when /dev/shm
is full (tests/fixtures/measure/hang_loader.py, torch_shm.md S09) is stopped by the stall
verdict after the diagnosis is printed, with status 124."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from measure_helpers import processes_with

from shmguard.render.run_text import command_text

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "src" / "shmguard" / "examples" / "seed_loader.py"
HANG = ROOT / "tests" / "fixtures" / "measure" / "hang_loader.py"
WATCH = [sys.executable, "-m", "shmguard", "sandbox", "--shm-size", "64m", "--"]
WATCH += [sys.executable, "-m", "shmguard", "run", "--brief", "--watch"]


@pytest.mark.timeout(180)
def test_seed_loader_failure_is_diagnosed_with_its_own_status(
    root_only: None, no_leftovers: None
) -> None:
    # DataLoader(timeout=30) turns the rare silent hang (about 5% of runs) into an exception
    # before the default 60 s stall time: either way the loader itself exits 1.
    cmd = [sys.executable, str(SEED), "--batches", "20", "--quiet", "--timeout", "30"]
    r = subprocess.run([*WATCH, "--", *cmd], capture_output=True, timeout=150, check=False)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert r.stdout.decode().startswith("loading 20 batches of 18.4 MiB")  # passed through
    report = err[err.index(f"shmguard run: {command_text(cmd)} ") :].splitlines()
    assert report[0].endswith("exited with status 1")
    assert report[1].startswith("/dev/shm: peak ") and " of 64 MiB (" in report[1]
    peak_pct = int(report[1].split(" of 64 MiB (")[1].split("%")[0])
    assert peak_pct >= 60  # it filled most of /dev/shm before failing
    assert report[2].startswith(("outcome: shm-exhausted: ", "outcome: hang: "))
    body = "\n".join(report)
    assert "shmguard explain: stderr (" in body
    assert "The log shows: /dev/shm size 64 MiB (line 1)" in body  # from the mount line
    assert "[torch-shm-alloc-failed]" in body or "[dataloader-timeout]" in body
    assert "--shm-size=" in body  # the fix, in the runtime's syntax
    # The size comes from the DataLoader model for the workers and batches the sampler saw
    # (4 workers x 18.38 MiB batches: peak 183.87 MiB, 256 MiB with headroom), not the
    # catalogue's 8 GiB starting point; a worker the scans missed is counted through its
    # forked siblings.
    size = re.search(r"Size: (\d+) MiB, the DataLoader model for the (\d) worker", body)
    assert size is not None, body
    assert (int(size[1]), int(size[2])) == (256, 4)
    assert processes_with(str(SEED)) == []


@pytest.mark.timeout(220)
@pytest.mark.parametrize("shm", ["64m", "16m"])
def test_a_stall_is_diagnosed_then_stopped_with_124(
    shm: str, root_only: None, no_leftovers: None
) -> None:
    cmd = [sys.executable, str(HANG)]
    argv = [*WATCH, "--stall-after", "3", "--stop-timeout", "5", "--", *cmd]
    argv[argv.index("64m")] = shm
    # Until 2026-12-01 about 1 run in 4 in 64 MiB never called the stall: the sampler missed
    # the failed allocation's moment at the limit, and 16 MiB free did not count as near full;
    # in 16 MiB, smaller than one 24 MiB item, it never did (the detector's margin is now at
    # least the largest torch block seen and the largest failed request; test_outcome has the
    # figures).
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _, raw = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the sandbox tears its namespace and cgroups down on SIGTERM
        _, raw = proc.communicate(timeout=60)
        pytest.fail(f"no stall verdict in 90 s; shmguard's stderr ended: {raw[-2000:]!r}")
    r = subprocess.CompletedProcess(argv, proc.returncode, b"", raw)
    err = r.stderr.decode()
    assert r.returncode == 124, err
    shown = command_text(cmd)  # cut to 80 characters
    stalled = err.index(f"shmguard run: {shown} stalled on a full /dev/shm; stopping it")
    diagnosis = err.index("[dataloader-feeder-failure]")
    stopped = err.index(f"shmguard run: stopped {shown} (stalled on a full /dev/shm)")
    assert stalled < diagnosis < stopped  # diagnosed before it was stopped
    evidence = err[stalled:].splitlines()[1]
    assert evidence.startswith("evidence: /dev/shm ")
    assert "no progress for" in evidence
    assert "failed" in evidence  # a failed allocation in the output or zero-block files
    assert err[stopped:].splitlines()[0].endswith("; exit 124")
    assert processes_with(str(HANG)) == []

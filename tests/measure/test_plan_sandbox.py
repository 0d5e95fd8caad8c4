"""`shmguard plan` against real tmpfs mounts: --check and --max-workers in a sandbox's /dev/shm,
and the recommended size running the real loader it was planned for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.measure.sandbox import SandboxSpec, run_sandboxed
from shmguard.units import MiB

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

SEED = ["--batch-size", "32", "--sample-shape", "3,224,224", "--num-workers", "4"]


def in_sandbox(shm: str, *plan_args: str) -> subprocess.CompletedProcess[str]:
    """``shmguard sandbox --shm-size SHM -- shmguard plan ARGS``."""
    inner = [sys.executable, "-m", "shmguard", "plan", *plan_args]
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "sandbox", "--shm-size", shm, "--", *inner],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_fails_in_64_mib(root_only: None, no_leftovers: None) -> None:
    done = in_sandbox("64m", *SEED, "--check")
    assert done.returncode == 1, done.stderr
    assert "does not fit: predicted peak ~183.87 MiB > 64 MiB free of 64 MiB in /dev/shm" in (
        done.stdout
    )


def test_check_passes_where_it_fits(root_only: None, no_leftovers: None) -> None:
    # uint8 images: 10 B' + 20 pages = 46.05 MiB in 64 MiB.
    done = in_sandbox("64m", *SEED, "--dtype", "uint8", "--check", "--format", "json")
    assert done.returncode == 0, done.stderr
    check = json.loads(done.stdout)["check"]
    assert check == {
        "path": "/dev/shm",
        "free": 64 * MiB,
        "total": 64 * MiB,
        "peak": 48_291_840,
        "fits": True,
    }


def test_max_workers_in_a_sandbox(root_only: None, no_leftovers: None) -> None:
    done = in_sandbox("64m", "--batch-size", "32", "--sample-shape", "3,224,224", "--max-workers")
    assert done.returncode == 1  # not one float32 worker fits in Docker's default
    assert done.stdout.startswith("no worker fits in the 64 MiB free in /dev/shm")
    done = in_sandbox("64m", *SEED[:4], "--dtype", "uint8", "--max-workers")
    assert done.returncode == 0
    assert done.stdout.startswith("5 workers fit in the 64 MiB free in /dev/shm")
    done = in_sandbox("256m", *SEED, "--max-workers", "--format", "json")
    data = json.loads(done.stdout)
    # nw=5: 12 B' + 23 pages = 220.6 MiB; nw=6: 14 B' + 26 pages = 257.4 MiB.
    assert data["max_workers"] == {"workers": 5, "free": 256 * MiB}


@pytest.mark.torch
@pytest.mark.slow
def test_the_recommended_size_runs_the_loader(root_only: None, no_leftovers: None) -> None:
    pytest.importorskip("torch")
    plan = make_plan(
        PlanRequest(num_workers=4, batch_size=32, sample_shape=(3, 224, 224), dtype="float32")
    )
    assert plan.shm is not None and plan.shm.bytes == 256 * MiB
    # The bundled loader with exactly these parameters, a slow consumer so the queues fill.
    argv = [sys.executable, "-m", "shmguard.examples.seed_loader", "--quiet"]
    argv += ["--batches", "16", "--step-time", "0.05"]
    done = run_sandboxed(SandboxSpec(tuple(argv), plan.shm.bytes), output="capture", timeout=150)
    assert done.exit_status == 0, done.stderr_tail[-2000:]


def test_check_without_a_dev_shm_does_not_fit(root_only: None) -> None:
    # A private mount namespace whose /dev is an empty tmpfs: no /dev/shm at all. It used to
    # exit 2 ("cannot read the free space"); run --require calls the same case not met.
    inner = f"mount -t tmpfs none /dev && exec {sys.executable} -m shmguard plan " + " ".join(
        [*SEED, "--check", "--format", "json"]
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    check = json.loads(done.stdout)["check"]
    assert (check["free"], check["total"], check["fits"]) == (0, None, False)

"""`shmguard plan` at the edges a platform engineer reaches: sizes no runtime can hold, options
that the batch description would silently drop, and a closed stdout."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shmguard.estimate.plan import PlanRequest, PlanTooLarge, make_plan, too_large_by
from shmguard.units import parse_docker_size, parse_k8s_quantity

PLAN = [sys.executable, "-m", "shmguard", "plan"]


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLAN, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        # 1e23 x 3 float32 samples: a 1.2e24-byte batch
        (["--batch-size", "99999999999999999999999", "--sample-shape", "3"],
         "--batch-size/--sample-shape"),
        (["--batch-size", "32", "--sample-shape", "999999999999,999999999999"],
         "--batch-size/--sample-shape"),
        # 8000 PiB per batch: under the 8 EiB a size flag takes, over it x 6 batches
        (["--batch-bytes", "8000p"], "--batch-bytes"),
        # A count too large on its own is named, not the batch it multiplies.
        (["--batch-size", "32", "--sample-shape", "3", "--num-workers", "9" * 40],
         "--num-workers"),
        (["--batch-bytes", "1m", "--num-workers", "99999999999999999999"], "--num-workers"),
        (["--batch-bytes", "1m", "--local-ranks", "99999999999999999"], "--local-ranks"),
        (["--batch-bytes", "1m", "--prefetch-factor", "9" * 20], "--prefetch-factor"),
        (["--batch-bytes", "1m", "--loaders", "9" * 20, "--local-ranks", "9" * 20],
         "--local-ranks/--loaders"),
    ],
)  # fmt: skip
def test_a_peak_no_runtime_can_hold_is_refused(args: list[str], flags: str) -> None:
    # It printed `docker run --shm-size=10995116277760t` and `sizeLimit: 10485760Ei`, exit 0:
    # sizes Docker (int64 bytes) and Kubernetes reject.
    for fmt in ("text", "docker", "k8s", "json"):
        extra = [] if "--num-workers" in args else ["--num-workers", "2"]
        done = plan(*args, *extra, "--format", fmt)
        assert done.returncode == 2, (fmt, done.stdout[-300:])
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"shmguard: error: {flags}: "), done.stderr
        assert "more than 8 EiB" in done.stderr


def test_a_peak_too_large_only_as_a_product_names_every_factor() -> None:
    # 1 TiB batches x 2**21 workers x 2**21 ranks: 2**82 bytes; no factor alone is too large
    request = PlanRequest(num_workers=2**21, batch_bytes=2**40, local_ranks=2**21)
    with pytest.raises(PlanTooLarge):
        make_plan(request)
    assert too_large_by(request) == ("batch", "num_workers", "local_ranks")
    assert too_large_by(PlanRequest(num_workers=2, batch_bytes=2**20)) == ()


def test_a_dimension_of_thousands_of_digits_is_a_shape_error() -> None:
    # int() refuses 4300+ digits with Python's own advice (sys.set_int_max_str_digits)
    done = plan("--batch-size", "32", "--sample-shape", "3," + "9" * 5000, "--num-workers", "1")
    assert done.returncode == 2
    assert done.stderr == (
        "shmguard: error: --sample-shape: invalid shape '3,99999999999999999999999999999999999...'"
        ": a dimension has more than 19 digits\n"
    )


@pytest.mark.parametrize("flag", ["--model-peak", "--margin"])
def test_a_memory_limit_no_runtime_can_hold_is_refused(flag: str) -> None:
    # 4000 PiB + a 4500 PiB margin; alone, 4000 PiB gets a 1000 PiB margin and fits
    args = ["--model-peak", "4000p", "--margin", "4500p"] if flag == "--margin" else [flag, "8000p"]
    done = plan("--batch-bytes", "1m", "--num-workers", "2", *args, "--format", "docker")
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("shmguard: error: --model-peak/--margin: "), done.stderr
    assert "memory limit" in done.stderr and "more than 8 EiB" in done.stderr
    done = plan("--batch-bytes", "1m", "--num-workers", "2", "--model-peak", "4000p")
    assert done.returncode == 0, done.stderr


def test_the_largest_plan_that_fits_in_int64_prints_sizes_runtimes_parse() -> None:
    # 500 PiB batches x 6 in flight: ~2.93 EiB peak, 4 EiB shm size after headroom
    done = plan("--batch-bytes", "500p", "--num-workers", "2", "--format", "docker")
    assert done.returncode == 0, done.stderr
    size = done.stdout.split("--shm-size=")[1].split()[0]
    assert 0 < parse_docker_size(size) < 2**63
    done = plan("--batch-bytes", "500p", "--num-workers", "2", "--format", "k8s")
    limit = done.stdout.split("sizeLimit: ")[1].split()[0]
    assert 0 < parse_k8s_quantity(limit) < 2**63


def test_make_plan_raises_plan_too_large() -> None:
    with pytest.raises(PlanTooLarge) as err:
        make_plan(PlanRequest(num_workers=2, batch_bytes=2**62))
    assert err.value.part == "shm"
    with pytest.raises(PlanTooLarge) as err:
        make_plan(PlanRequest(num_workers=2, batch_bytes=2**20, model_peak=2**63 - 1))
    assert err.value.part == "memory"


def test_dtype_with_batch_bytes_is_refused() -> None:
    # --dtype describes the samples of --sample-shape; with --batch-bytes it was dropped
    # silently (`--dtype bogus` passed).
    done = plan("--batch-bytes", "1m", "--dtype", "float16", "--num-workers", "2")
    assert done.returncode == 2
    assert done.stderr == (
        "shmguard: error: --dtype: describes --sample-shape's elements; with --batch-bytes "
        "give the batch's bytes only\n"
    )
    # the default dtype is still float32 when the shape is given
    done = plan("--batch-size", "2", "--sample-shape", "1024", "--num-workers", "1")
    assert done.returncode == 0 and "batch 2 x 1024 float32" in done.stdout


def test_a_closed_stdout_keeps_the_exit_status() -> None:
    # `plan --check --format json >&-` in a CI step that wants the status only: it died with
    # AttributeError (sys.stdout is None) and exit 1 whether the plan fit or not.
    for fmt in ("json", "docker", "text"):
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", *PLAN, "--batch-bytes", "1m", "--num-workers",
             "1", "--format", fmt],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (fmt, done.stderr)
        assert done.stderr == ""

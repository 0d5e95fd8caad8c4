"""`shmguard plan` as a user runs it: text, JSON against its schema, snippets, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from schema_registry import validator
from shmguard.units import GiB, MiB

SEED = ["--batch-size", "32", "--sample-shape", "3,224,224", "--dtype", "float32"]


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "plan", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_text_report() -> None:
    done = plan(*SEED, "--num-workers", "4")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "4 workers x prefetch 2, batch 32 x 3x224x224 float32" in out
    assert "~165.49 MiB (173,527,040 B): 9 batches" in out
    assert "~183.87 MiB (192,798,720 B): 10 batches" in out
    assert "256 MiB  (predicted peak ~183.87 MiB + 25% headroom" in out
    assert "docker run --shm-size=256m IMAGE ..." in out
    assert "sizeLimit: 256Mi" in out
    assert "not counted: batches the program keeps alive" in out


def test_json_validates_and_has_the_figures() -> None:
    done = plan(*SEED, "--num-workers", "4", "--model-peak", "4g", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("plan").validate(data)
    assert data["schema"] == "shmguard.plan/1"
    assert data["prediction"]["steady"] == 173_527_040
    assert data["prediction"]["peak"] == 192_798_720
    assert data["batch_pages"] == 19_271_680
    assert (data["shm_size"], data["memory_limit"]) == (256 * MiB, 6 * GiB)
    assert data["check"] is None and data["max_workers"] is None
    docker = next(s for s in data["snippets"] if s["runtime"] == "docker")
    assert docker["text"] == "docker run --shm-size=256m --memory=6g IMAGE ..."


def test_json_with_check_and_max_workers_validates() -> None:
    done = plan(*SEED, "--num-workers", "4", "--format", "json", "--check", "--max-workers")
    data = json.loads(done.stdout)
    validator("plan").validate(data)
    check = data["check"]
    assert check["path"] == "/dev/shm" and check["peak"] == 192_798_720
    assert done.returncode == (0 if check["fits"] else 1)
    assert data["max_workers"]["free"] == check["free"]


def test_json_without_workers_needs_no_shm() -> None:
    done = plan(*SEED, "--num-workers", "0", "--format", "json")
    data = json.loads(done.stdout)
    validator("plan").validate(data)
    assert data["shm_size"] is None and data["snippets"] == [] and data["prediction"]["peak"] == 0


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("docker", "docker run --shm-size=256m --memory=6g IMAGE ...\n"),
        ("compose", 'services:\n  app:\n    shm_size: "256m"\n    mem_limit: "6g"\n'),
    ],
)
def test_snippet_formats(fmt: str, text: str) -> None:
    done = plan(*SEED, "--num-workers", "4", "--model-peak", "4g", "--format", fmt)
    assert done.returncode == 0 and done.stdout == text


def test_k8s_format() -> None:
    done = plan(*SEED, "--num-workers", "4", "--format", "k8s")
    assert done.returncode == 0
    assert done.stdout.startswith("spec:\n  containers:\n")
    assert "        medium: Memory\n        sizeLimit: 256Mi\n" in done.stdout
    assert "limits" not in done.stdout  # no --model-peak, no memory limit


def test_batch_bytes_ranks_and_flags() -> None:
    done = plan(
        "--batch-bytes", "18.375m", "--num-workers", "4", "--local-ranks", "8",
        "--loaders", "2", "--pin-memory", "--persistent-workers", "--format", "json",
    )  # fmt: skip
    data = json.loads(done.stdout)
    validator("plan").validate(data)
    assert data["prediction"]["peak"] == 16 * 192_798_720
    assert data["prediction"]["pinned_memory"] == 16 * 9 * 19_271_680
    assert data["loader"]["batch_bytes"] == 19_267_584 and data["loader"]["dtype"] is None
    assert any("persistent_workers" in n for n in data["notes"])
    assert any("x16: 8 local rank(s) x 2 loader(s)" in n for n in data["notes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*SEED[:2], "--sample-shape", "3x224", "--num-workers", "4"], "--sample-shape: invalid "
         "shape '3x224': write positive integers separated by commas, e.g. 3,224,224"),
        ([*SEED[:2], "--sample-shape", "-1", "--num-workers", "4"], "--sample-shape: invalid "
         "shape '-1'"),
        ([*SEED[:2], "--sample-shape", "3,0", "--num-workers", "4"], "--sample-shape: invalid "
         "shape '3,0': every dimension must be >= 1"),
        (["--batch-size", "0", "--sample-shape", "3", "--num-workers", "4"],
         "--batch-size: must be >= 1, got 0"),
        (["--batch-size", "-2", "--sample-shape", "3", "--num-workers", "4"],
         "--batch-size: must be >= 1, got -2"),
        ([*SEED, "--num-workers", "-1"], "--num-workers: must be >= 0, got -1"),
        ([*SEED, "--num-workers", "4", "--prefetch-factor", "0"],
         "--prefetch-factor: must be >= 1, got 0"),
        ([*SEED, "--num-workers", "4", "--local-ranks", "0"], "--local-ranks: must be >= 1"),
        ([*SEED[:4], "--dtype", "float33", "--num-workers", "4"],
         "--dtype: unknown dtype 'float33'; known: bfloat16, bool,"),
        (["--batch-bytes", "0", "--num-workers", "4"],
         "--batch-bytes: invalid size '0': must be greater than 0"),
        (["--batch-bytes", "-5m", "--num-workers", "4"],
         "--batch-bytes: invalid size '-5m': must not be negative"),
        ([*SEED, "--num-workers", "4", "--model-peak", "0"],
         "--model-peak: invalid size '0': must be greater than 0"),
        ([*SEED, "--num-workers", "4", "--margin", "-1g"], "--margin: invalid size '-1g'"),
        (["--batch-bytes", "5m", *SEED[:2], "--num-workers", "4"],
         "--batch-bytes: give it instead of --batch-size and --sample-shape"),
        (["--sample-shape", "3", "--num-workers", "4"], "--batch-size: required"),
        (SEED, "--num-workers: required (or ask --max-workers)"),
        ([*SEED, "--num-workers", "4", "--format", "docker", "--check"],
         "--format docker: prints a snippet only"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    done = plan(*args)
    assert done.returncode == 2
    assert done.stderr.startswith(f"shmguard: error: {message}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stdout == ""


def test_help_lists_plan() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "predict: plan," in done.stdout

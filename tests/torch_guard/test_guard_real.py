"""The guard on real PyTorch 2.13 in a real 64 MiB tmpfs (the sandbox): check_dataloader
stops the seed's loader before any batch, adapt makes it finish, guard turns the real worker
failure, a real SIGBUS and a real hang into ShmExhaustedError with the figures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shmguard.estimate import LoaderSpec, batch_leaves, padded_bytes, predict, shm_size_for
from shmguard.inspect.host import inspect_host
from shmguard.measure.sandbox import SandboxResult, SandboxSpec, run_sandboxed
from shmguard.units import DOCKER_DEFAULT_SHM, format_docker_size, format_iec

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow]

CHILD = Path(__file__).with_name("guard_child.py")
#: The seed's batch: 32 x 3x224x224 float32 images and 32 int64 labels, page-rounded.
SEED_PAGES = padded_bytes(batch_leaves(32, (3, 224, 224), "float32"))
SEED_PEAK = predict(LoaderSpec(SEED_PAGES, num_workers=4, prefetch_factor=2)).peak
#: The hang loader's item: one 24 MiB float32 array, a tensor after default_convert.
HANG_ITEM = 24 * 2**20


def sandboxed(*args: str, env: dict[str, str] | None = None) -> SandboxResult:
    spec = SandboxSpec(command=(sys.executable, *args), shm_size=DOCKER_DEFAULT_SHM, env=env)
    return run_sandboxed(spec, output="capture", timeout=150)


def child_result(r: SandboxResult) -> dict[str, Any]:
    lines = [ln for ln in r.stdout_tail.decode().splitlines() if ln.startswith("RESULT ")]
    assert lines, r.stderr_tail.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def fix_line(size: int) -> str:
    """What the message says for the runtime shmguard detects here (the sandbox shares our
    root filesystem, so the same markers)."""
    runtime = inspect_host(holders=False, gpus=False).runtime.name
    if runtime == "docker":
        return f"docker run --shm-size={format_docker_size(size)} IMAGE ..."
    return f"Give /dev/shm {format_iec(size)}"


@pytest.mark.timeout(200)
def test_check_raises_before_any_batch_in_64_mib(root_only: None) -> None:
    r = sandboxed("-m", "shmguard.examples.seed_loader", "--check", "raise", "--batches", "10")
    err = r.stderr_tail.decode(errors="replace")
    assert r.exit_status == 1, err
    assert b"loading" not in r.stdout_tail and b"batch " not in r.stdout_tail
    assert "shmguard.torch.errors.ShmInsufficientError: DataLoader does not fit" in err
    assert f"it needs up to {format_iec(SEED_PEAK)} (predicted peak)" in err
    assert f"{format_iec(DOCKER_DEFAULT_SHM)} of {format_iec(DOCKER_DEFAULT_SHM)} is free" in err
    assert f"{format_iec(SEED_PAGES)} each (the largest of 3 batches made" in err
    size = shm_size_for(SEED_PEAK).bytes
    assert f"Fix: Give /dev/shm {format_iec(size)}" in err
    assert fix_line(size) in err
    assert "num_workers=1, prefetch_factor=1 fits" in err
    # No worker started: no torch_* allocation and no DataLoader traceback.
    assert "unable to allocate shared memory" not in err


@pytest.mark.timeout(200)
def test_adapt_makes_the_same_job_finish_in_64_mib(root_only: None) -> None:
    r = sandboxed("-m", "shmguard.examples.seed_loader", "--check", "adapt", "--batches", "20")
    out, err = r.stdout_tail.decode(), r.stderr_tail.decode(errors="replace")
    assert r.exit_status == 0, err
    assert "prefetch_factor 2 -> 1, num_workers 4 -> 1" in err
    one = predict(LoaderSpec(SEED_PAGES, num_workers=1, prefetch_factor=1)).peak
    assert f"predicted peak {format_iec(one)} (was {format_iec(SEED_PEAK)})" in err
    assert "num_workers=1 prefetch_factor=1" in out
    assert "done: 20 batches" in out


@pytest.mark.timeout(200)
def test_guard_turns_the_real_worker_failure_into_shm_exhausted(root_only: None) -> None:
    r = sandboxed(str(CHILD), "seed", "3")
    res = child_result(r)
    assert r.exit_status == 3
    # A crash on most runs, a silent hang on a few percent (torch_shm.md section 2).
    assert res["kind"] in ("alloc-failed", "hang"), res
    assert res["total"] == DOCKER_DEFAULT_SHM
    assert res["peak"] > 40 * 2**20
    assert res["batches"] == res["seen"] < 20
    assert res["sizing_pages"] == SEED_PAGES
    # The guard sizes batches once it has shut the workers down, and says so.
    assert res["sizing_basis"] == (
        "the largest of 3 batches made after the workers were stopped, all the same size"
    )
    assert f"({res['sizing_basis']})." in res["message"]
    assert res["fix_size"] == shm_size_for(SEED_PEAK + res["baseline"]).bytes
    assert fix_line(res["fix_size"]) in res["message"]
    assert res["timeout"] >= 60 and f"DataLoader(timeout={res['timeout']})" in res["message"]
    if res["kind"] == "alloc-failed":
        assert res["cause"].startswith("RuntimeError: Caught RuntimeError in DataLoader worker")
        assert "unable to allocate shared memory(shm)" in res["cause"]
        assert any("No space left on device (28)" in e for e in res["evidence"])
        # Each failed allocation (one per worker that failed) asked for one of the batch's
        # tensors: the images, 32 x 3 x 224 x 224 x 4 bytes, always among them; the labels,
        # 32 x 8 bytes, when the tmpfs had not even a page left (seen once in CI).
        sizes = {n for _, n in res["failed_files"]}
        assert 32 * 3 * 224 * 224 * 4 in sizes
        assert sizes <= {32 * 3 * 224 * 224 * 4, 32 * 8}
        assert "a worker could not allocate shared memory" in res["message"]


@pytest.mark.timeout(200)
def test_guard_turns_a_real_hang_into_shm_exhausted(root_only: None) -> None:
    r = sandboxed(str(CHILD), "hang", "3")
    res = child_result(r)
    assert r.exit_status == 3
    assert res["kind"] == "hang", res
    assert res["cause"] is None  # a hang has no PyTorch exception
    assert res["total"] == DOCKER_DEFAULT_SHM
    # Two 24 MiB items fit in 64 MiB, the third cannot: the peak is above two items.
    assert res["peak"] >= 2 * HANG_ITEM
    assert res["failed_files"] and {n for _, n in res["failed_files"]} == {HANG_ITEM}
    assert any("no batch for" in e for e in res["evidence"])
    assert any("zero-block torch_* file(s)" in e for e in res["evidence"])
    assert res["sizing_pages"] == HANG_ITEM
    peak = predict(LoaderSpec(HANG_ITEM, num_workers=4, prefetch_factor=2)).peak
    assert res["fix_size"] == shm_size_for(peak + res["baseline"]).bytes
    assert "no batch arrived while /dev/shm was full" in res["message"]
    assert res["elapsed"] < 60
    assert res["pickles"]


@pytest.mark.timeout(200)
def test_guard_turns_a_real_sigbus_into_shm_exhausted(root_only: None, tmp_path: Path) -> None:
    # Torch before PR #161910 did not fallocate: a worker writing past what tmpfs can back
    # dies of SIGBUS. A preloaded posix_fallocate that reports "not supported" brings that
    # path back on torch 2.13 (MapAllocator then carries on with a sparse file).
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "nofalloc.c"
    src.write_text(
        "#include <errno.h>\n#include <sys/types.h>\n"
        "int posix_fallocate(int f, off_t o, off_t l) { (void)f; (void)o; (void)l; "
        "return EOPNOTSUPP; }\n"
        "int posix_fallocate64(int f, off_t o, off_t l) { (void)f; (void)o; (void)l; "
        "return EOPNOTSUPP; }\n"
    )
    lib = tmp_path / "nofalloc.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    r = sandboxed(str(CHILD), "seed", "3", env={**os.environ, "LD_PRELOAD": str(lib)})
    res = child_result(r)
    assert res["kind"] == "bus-error", res
    assert res["cause"].startswith("RuntimeError: DataLoader worker (pid(s) ")
    assert res["cause"].endswith(") exited unexpectedly")
    assert any("is killed by signal: Bus error" in e for e in res["evidence"])
    assert res["total"] == DOCKER_DEFAULT_SHM and res["sizing_pages"] == SEED_PAGES
    assert "killed by SIGBUS" in res["message"]

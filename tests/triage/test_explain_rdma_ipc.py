"""Failures that mention shared memory or memory but are not a too-small /dev/shm: pinned
(RDMA-registered) memory, shared-memory files deleted under a running job (systemd-logind's
RemoveIPC), a stalled vLLM/SGLang message queue, and a /dev/shm the job may not write. Each is
diagnosed as its own kind, with no /dev/shm size, and says what decides it; the shm failure
next to them (Ray's object store) still gets one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import diagnose_text

from shmguard.triage.model import Diagnosis, Result, Signature
from shmguard.triage.scoring import checks_in


def _top(d: Diagnosis) -> Result:
    assert d.results, "nothing matched"
    return d.results[0]


def _ids(d: Diagnosis) -> set[str]:
    return {r.id for r in d.results}


def _no_shm_size(d: Diagnosis) -> None:
    for r in d.results:
        assert r.fix is None or r.fix.shm_size is None, r.id


# --- pinned memory: NCCL's verbs wrapper, aws-ofi-nccl, libfabric -------------------------


@pytest.mark.parametrize(
    "line",
    [
        # nccl-tests #206 (NCCL 2.19+: ibv_reg_mr_iova2)
        "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
        "Cannot allocate memory",
        # vLLM #19613 (dmabuf registration of GPU memory)
        "host1:318:3584 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed "
        "with error Cannot allocate memory",
        # older NCCL, no errno
        "host1:4242:4300 [0] misc/ibvwrap.cc:106 NCCL WARN Call to ibv_reg_mr failed",
        # aws-ofi-nccl (NVIDIA/nccl #563)
        "register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) for "
        "device 0. RC: 12, Error: Cannot allocate memory",
    ],
)
def test_registration_enomem_is_memlock_of_medium_confidence(
    line: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.confidence, top.remedy) == (
        "memlock-limit",
        "memlock",
        "medium",
        "config",
    )
    _no_shm_size(d)


def test_queue_creation_enomem_is_memlock_of_high_confidence(
    catalogue: Sequence[Signature],
) -> None:
    d = diagnose_text(
        "misc/ibvwrap.cc:141 NCCL WARN Call to ibv_create_qp failed with error "
        "Cannot allocate memory\n",
        catalogue,
    )
    assert (_top(d).id, _top(d).confidence) == ("memlock-limit", "high")


@pytest.mark.parametrize(
    "line",
    [
        # EFAULT: GPU memory the adapter cannot reach (no peer-memory module), not a limit
        "misc/ibvwrap.cc:106 NCCL WARN Call to ibv_reg_mr failed with error Bad address",
        "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Bad address",
        "misc/ibvwrap.cc:141 NCCL WARN Call to ibv_create_qp failed with error Invalid argument "
        "errno 22",
        "register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type = 2) for "
        "device 4. RC: -22, Error: Invalid argument",
    ],
)
def test_other_errnos_of_the_same_calls_are_not_memlock(
    line: str, catalogue: Sequence[Signature]
) -> None:
    assert "memlock-limit" not in _ids(diagnose_text(line + "\n", catalogue))


def test_unhandled_system_error_is_explained_by_the_registration_failure(
    catalogue: Sequence[Signature],
) -> None:
    log = (
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system "
        "error (run with NCCL_DEBUG=INFO for details)\n"
        "host1:318:3584 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed "
        "with error Cannot allocate memory\n"
    )
    d = diagnose_text(log, catalogue)
    by_id = {r.id: r for r in d.results}
    assert _top(d).id == "memlock-limit"
    assert by_id["nccl-system-error"].explained_by == "memlock-limit"
    assert by_id["nccl-system-error"].confidence == "low"
    _no_shm_size(d)


def test_memlock_decide_names_ulimit_and_nccl_debug(catalogue: Sequence[Signature]) -> None:
    """With `ulimit -l` unlimited, ENOMEM from a registration means the buffers are too big
    (NCCL_BUFFSIZE, vLLM #19613): NCCL_DEBUG=INFO's environment lines show that."""
    d = diagnose_text("NCCL WARN Call to ibv_reg_mr failed\n", catalogue)
    top = _top(d)
    assert "ulimit -l" in top.decide
    assert "NCCL_BUFFSIZE" in top.decide
    assert checks_in(top.decide) == ("nccl-debug",)
    assert top.fix is not None
    assert any("NCCL_BUFFSIZE" in step for step in top.fix.app)


# --- shared-memory files deleted under the job (systemd RemoveIPC and other cleaners) ------


@pytest.mark.parametrize(
    "line",
    [
        # the NCCL troubleshooting guide's wording, and with the errno of newer releases
        "NCCL WARN unlink shared memory /dev/shm/nccl-d5rTd0 failed, error: No such file or "
        "directory",
        "host1:1:2 [1] NCCL WARN unlink shared memory /dev/shm/nccl-x8Pq2a failed, error: No such "
        "file or directory (2)",
    ],
)
def test_nccl_unlink_enoent_is_a_missing_segment(line: str, catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(line + "\n", catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.remedy) == ("nccl-shm-attach", "nccl_shm_attach", "investigate")
    assert "RemoveIPC" in top.decide and "RemoveIPC" in top.cause
    assert top.evidence[0].captures["path"].startswith("/dev/shm/nccl-")
    _no_shm_size(d)


def test_nccl_unlink_with_another_errno_is_not_a_missing_segment(
    catalogue: Sequence[Signature],
) -> None:
    line = (
        "NCCL INFO unlink shared memory /dev/shm/nccl-1 failed, error: Operation not permitted (1)"
    )
    assert "nccl-shm-attach" not in _ids(diagnose_text(line + "\n", catalogue))


def test_slurm_gets_the_removeipc_sentence(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        "NCCL WARN unlink shared memory /dev/shm/nccl-d5rTd0 failed, error: No such file or "
        "directory\n",
        catalogue,
        runtime="slurm",
    )
    fix = _top(d).fix
    assert fix is not None
    assert any("RemoveIPC=no" in note for note in fix.runtime_notes)


def test_torch_unlink_enoent_is_a_deleted_file_not_a_full_shm(
    catalogue: Sequence[Signature],
) -> None:
    d = diagnose_text(
        "RuntimeError: could not unlink the shared memory file /torch_<pid>_<hash>_<n> : No such "
        "file or directory (2)\n",
        catalogue,
    )
    top = _top(d)
    assert (top.id, top.kind, top.also, top.confidence) == (
        "torch-shm-unlink-missing",
        "other",
        ("worker_hang",),
        "medium",
    )
    assert top.notes == ()
    assert "RemoveIPC" in top.decide and "py-spy dump" in top.decide
    _no_shm_size(d)


def test_torch_unlink_in_the_feeder_thread_says_the_loader_hangs(
    catalogue: Sequence[Signature],
) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 244, in _feed\n'
        "    obj = _ForkingPickler.dumps(obj)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/reductions.py", '
        "line 607, in reduce_storage\n"
        "    fd, size = storage._share_fd_cpu_()\n"
        "RuntimeError: could not unlink the shared memory file /torch_4908_368690559_8693 : No "
        "such file or directory (2)\n"
    )
    d = diagnose_text(log, catalogue)
    top = _top(d)
    assert top.id == "torch-shm-unlink-missing"
    assert any("hangs" in n for n in top.notes)
    # not the feeder's shm-exhaustion signature: nothing here ran out of space
    assert "dataloader-feeder-failure" not in _ids(d)
    _no_shm_size(d)


@pytest.mark.parametrize(
    ("line", "confidence"),
    [
        # torch 1.x c10 error, no errno (pytorch #30225)
        (
            "  what():  could not unlink the shared memory file /torch_30417_1951398734 (close at "
            "/opt/conda/work/aten/src/TH/THAllocator.cpp:475)",
            "low",
        ),
        (
            "RuntimeError: could not unlink the shared memory file /torch_1_2_3 : "
            "Permission denied (13)",
            None,
        ),
    ],
)
def test_torch_unlink_without_errno_is_low_and_eacces_is_not_this(
    line: str, confidence: str | None, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    got = {r.id: r.confidence for r in d.results}.get("torch-shm-unlink-missing")
    assert got == confidence


# --- a stalled message queue that only mentions blocks ------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vLLM 0.5.x (vLLM #7454)
        "(VllmWorkerProcess pid=3253) WARNING 08-13 11:31:37 shm_broadcast.py:386] No available "
        "block found in 60 second.",
        # newer vLLM
        "(EngineCore pid=395) INFO 07-12 02:35:01 [shm_broadcast.py:705] No available shared "
        "memory broadcast block found in 60 seconds. This typically happens when some processes "
        "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache "
        "quantization).",
    ],
)
def test_every_generation_of_the_queue_stall_is_a_stall(
    line: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    top = _top(d)
    assert (top.id, top.kind) == ("vllm-shm-broadcast-stall", "vllm_stall")
    assert top.evidence[0].captures["seconds"] == "60"
    _no_shm_size(d)


def test_kv_cache_block_error_is_not_the_queue_stall(catalogue: Sequence[Signature]) -> None:
    line = (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine."
    )
    assert "vllm-shm-broadcast-stall" not in _ids(diagnose_text(line + "\n", catalogue))


# --- Ray's object store: the first wording of its ValueError still gets a size -------------


def test_ray_capacity_wording_is_the_object_store_with_a_size(
    catalogue: Sequence[Signature],
) -> None:
    d = diagnose_text(
        "ValueError: The configured object store size exceeds the capacity of /dev/shm. This "
        "will harm performance. To proceed regardless of this warning, you can set "
        "RAY_OBJECT_STORE_ALLOW_SLOW_STORAGE=1.\n",
        catalogue,
    )
    top = _top(d)
    assert (top.id, top.kind, top.remedy) == ("ray-object-store-shm", "ray_shm", "shm-size")
    assert top.fix is not None and top.fix.shm_size is not None
    assert top.fix.shm_size.bytes == 16 * 1024**3  # the signature's default: no size in the line


# --- /dev/shm not writable: browsers' wordings, and the runtime that mounts it -------------


@pytest.mark.parametrize(
    "line",
    [
        # Firefox on ECS Fargate with a task volume at /dev/shm (amazon-ecs-agent #2324)
        "WARNING: failed to open shm: Permission denied: file /builds/worker/workspace/build/src/"
        "ipc/chromium/src/base/shared_memory_posix.cc, line 250",
        "[7476:0812/144030.697815:ERROR:platform_shared_memory_region_posix.cc(214)] Creating "
        "shared memory in /dev/shm/.org.chromium.Chromium.egvmT0 failed: Permission denied (13)",
        "Failed to create shared memory file /WK2SharedMemory.2415940274: Permission denied",
    ],
)
def test_browser_eacces_is_permission_and_runtime_config(
    line: str, catalogue: Sequence[Signature]
) -> None:
    d = diagnose_text(line + "\n", catalogue)
    top = _top(d)
    assert (top.id, top.kind, top.also) == ("shm-create-denied", "shm_open", ("runtime_config",))
    _no_shm_size(d)


def test_chromium_eperm_is_not_a_permission_of_dev_shm(catalogue: Sequence[Signature]) -> None:
    """EPERM comes from a sandbox (snap confinement, seccomp), not from /dev/shm's mode."""
    line = (
        "[4059:0526/114059.355927:ERROR:platform_shared_memory_region_posix.cc(250)] Creating "
        "shared memory in /dev/shm/.org.chromium.Chromium.t9ksg7 failed: Operation not "
        "permitted (1)"
    )
    assert "shm-create-denied" not in _ids(diagnose_text(line + "\n", catalogue))


def test_ecs_gets_the_task_volume_sentence(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        "WARNING: failed to open shm: Permission denied: file shared_memory_posix.cc, line 250\n",
        catalogue,
        runtime="ecs",
    )
    fix = _top(d).fix
    assert fix is not None
    assert any("task volume" in n and "sharedMemorySize" in n for n in fix.runtime_notes)

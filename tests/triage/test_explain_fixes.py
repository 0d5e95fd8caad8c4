"""Size choice and fix rendering: exact sizes for each rule, snippets from the shared
renderer, the memory limit from the size decision, no snippets for app-side or non-shm fixes."""

from __future__ import annotations

from collections.abc import Sequence

from _triage_helpers import FIXTURES, diagnose_text

from shmguard.fix.snippets import fix_snippets, render_snippets
from shmguard.model import shm_changes
from shmguard.triage.model import Signature
from shmguard.units import GiB, MiB

RAYLET = (
    "(raylet) store_runner.cc:83: System memory request exceeds memory available in /dev/shm. "
    "The request is for 10200547328 bytes, and the amount available is 9663676416 bytes.\n"
)
EVICTED = (
    "  Warning  Evicted  9m38s  kubelet, host1  "
    'Usage of EmptyDir volume "dshm" exceeds the limit "1Gi".\n'
)
TRITON = (
    "UNAVAILABLE: Internal: Unable to initialize shared memory key "
    "'triton_python_backend_shm_region_3' "
    "to requested size (67108864 bytes). Error: No space left on device\n"
)
BUS = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.\n"


def test_need_times_factor(catalogue: Sequence[Signature]) -> None:
    fix = diagnose_text(RAYLET, catalogue).results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 12 * GiB  # 10.45 GiB, rounded up in 2 GiB steps
    assert fix.shm_size.basis == "1.1 × the 9.5 GiB requested at line 1, rounded up"


def test_twice_the_size_the_log_shows(catalogue: Sequence[Signature]) -> None:
    fix = diagnose_text(EVICTED, catalogue).results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 2 * GiB
    assert fix.shm_size.basis == "twice the /dev/shm size the log shows (1 GiB, line 1)"
    assert fix.runtime == "kubernetes"  # the eviction message implies it
    assert [s.runtime for s in fix_snippets(fix)] == ["kubernetes"]
    assert "sizeLimit: 2Gi" in fix_snippets(fix)[0].text


def test_triton_per_instance_factor(catalogue: Sequence[Signature]) -> None:
    fix = diagnose_text(TRITON, catalogue).results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 256 * MiB


def test_default_with_basis_and_override(catalogue: Sequence[Signature]) -> None:
    fix = diagnose_text(BUS, catalogue).results[0].fix
    assert fix is not None and fix.shm_size is not None
    # A DataLoader failure whose log shows no size and no loader: the sizing policy's
    # default, said so, with the pointers to measure it (not the signature's 8 GiB).
    assert fix.shm_size.bytes == GiB and fix.shm_size.source == "default"
    assert fix.shm_size.basis.startswith("the log shows no /dev/shm size and no DataLoader")
    assert "`shmguard measure`" in fix.shm_size.basis
    assert any("`shmguard plan" in step for step in fix.next)
    assert fix_snippets(fix) == render_snippets(shm_changes(GiB))
    fix = diagnose_text(BUS, catalogue, shm_size=3 * GiB, runtime="compose").results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 3 * GiB and fix.shm_size.basis == "the size given with --shm-size"
    assert fix_snippets(fix) == render_snippets(shm_changes(3 * GiB), ["compose"])


def test_the_size_the_user_wrote_is_reused(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(
        'invalid argument "2Gi" for "--shm-size" flag: invalid suffix: \'gi\'\n', catalogue
    )
    fix = d.results[0].fix
    assert d.results[0].id == "docker-size-syntax"
    assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == 2 * GiB
    d = diagnose_text('strconv.ParseInt: parsing "2gb": invalid syntax\n', catalogue)
    fix = d.results[0].fix
    assert fix is not None and fix.runtime == "compose"
    assert fix_snippets(fix)[0].text.endswith('shm_size: "2g"')


def test_memory_limit_follows_the_size_decision(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text((FIXTURES / "mixed_ranks_nccl.log").read_bytes(), catalogue)
    assert d.runtime == "docker"
    facts = {f.name: f.bytes for f in d.facts}
    assert facts == {"mem_limit": 32 * GiB, "shm_total": 64 * MiB}
    fix = d.results[0].fix
    assert d.results[0].id == "nccl-shm-segment"
    assert fix is not None and fix.shm_size is not None
    # 1 GiB fits beside the policy's 1 GiB margin under 32 GiB: the limit stays, as in
    # check --fix, the webhook and plan (the decision's Sized.memory_limit is None).
    assert fix.shm_size.bytes == GiB and fix.memory_limit is None
    assert fix.shm_size.memory_limit is None
    assert fix_snippets(fix)[0].text == "docker run --shm-size=1g IMAGE ..."
    # A --shm-size is taken as given: the limit grows by it, 32 GiB + 1 GiB (whole GiB: the
    # sizing policy's memory steps above 4 GiB).
    d = diagnose_text((FIXTURES / "mixed_ranks_nccl.log").read_bytes(), catalogue, shm_size=GiB)
    fix = d.results[0].fix
    assert fix is not None and fix.memory_limit == 33 * GiB
    assert fix_snippets(fix)[0].text == "docker run --shm-size=1g --memory=33g IMAGE ..."


def test_the_configured_memory_margin_reaches_explain(catalogue: Sequence[Signature]) -> None:
    import io

    from shmguard.estimate import Policy
    from shmguard.triage import explain_streams

    log = (FIXTURES / "mixed_ranks_nccl.log").read_bytes()
    d = explain_streams(
        [("log", io.BytesIO(log))], signatures=catalogue, policy=Policy(memory_margin=64 * GiB)
    )
    fix = d.results[0].fix
    # The 32 GiB limit is below the 64 GiB margin: 64 GiB + 1 GiB.
    assert fix is not None and fix.memory_limit == 65 * GiB


def test_app_runtime_has_no_snippets(catalogue: Sequence[Signature]) -> None:
    fix = diagnose_text(BUS, catalogue, runtime="app").results[0].fix
    assert fix is not None and fix_snippets(fix) == () and fix.shm_size is None
    assert any("num_workers" in s for s in fix.app)


def test_oom_and_cuda_fixes_print_no_shm_size(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text((FIXTURES / "kubectl_describe_oomkilled.txt").read_bytes(), catalogue)
    top = d.results[0]
    assert top.id == "memory-oom-kill" and top.confidence == "high"
    assert top.fix is not None and top.fix.shm_size is None and fix_snippets(top.fix) == ()
    assert d.runtime == "kubernetes"
    assert top.fix.runtime_notes == (
        "Raise resources.limits.memory of the container (Last State: OOMKilled confirms it).",
    )
    d = diagnose_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", catalogue
    )
    assert d.results[0].id == "cuda-oom" and d.results[0].fix is not None
    assert fix_snippets(d.results[0].fix) == ()


def test_order_of_shm_and_oom(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text((FIXTURES / "shm_then_oom.log").read_bytes(), catalogue)
    (s,) = d.sequence
    assert (s.first, s.first_line, s.then, s.then_line) == (
        "dataloader-bus-error",
        3,
        "memory-oom-kill",
        5,
    )
    assert "came before the OOM kill" in s.meaning
    d = diagnose_text((FIXTURES / "oom_then_shm.log").read_bytes(), catalogue)
    (s,) = d.sequence
    assert (s.first, s.first_line, s.then, s.then_line) == (
        "memory-oom-kill",
        1,
        "torch-shm-alloc-failed",
        3,
    )
    assert "Fix the memory limit first" in s.meaning


BARE_ENOSPC = "OSError: [Errno 28] No space left on device\n"
SHM_FULL_DF = "shm              64M   64M     0 100% /dev/shm\n"


def test_bare_enospc_gets_no_shm_size_without_shm_evidence(
    catalogue: Sequence[Signature],
) -> None:
    # The line does not say which file system was full (a disk, /tmp, a cache directory or
    # /dev/shm): the fix says how to find it, and gives no size.
    d = diagnose_text(BARE_ENOSPC, catalogue)
    top = d.results[0]
    assert top.id == "enospc-bare" and top.fix is not None
    assert top.fix.shm_size is None and top.fix.changes == ()
    assert "`df -h /dev/shm`" in top.decide and "`df -h` on the directory" in top.decide
    # Inside a DataLoader traceback it ranks as medium, still without a size.
    traced = (
        '  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", '
        "line 308, in _worker_loop\n" + BARE_ENOSPC
    )
    top = diagnose_text(traced, catalogue).results[0]
    assert (top.id, top.confidence) == ("enospc-bare", "medium")
    assert top.fix is not None and top.fix.shm_size is None


def test_bare_enospc_gets_a_size_when_the_log_shows_dev_shm_full(
    catalogue: Sequence[Signature],
) -> None:
    d = diagnose_text(SHM_FULL_DF + BARE_ENOSPC, catalogue)
    bare = next(r for r in d.results if r.id == "enospc-bare")
    assert bare.fix is not None and bare.fix.shm_size is not None
    # 1 GiB: the sizing policy's default (a DataLoader-kind failure whose log shows no
    # loader), more than twice the 64 MiB df shows.
    assert bare.fix.shm_size.bytes == GiB
    assert "64 MiB, line 1" in bare.fix.shm_size.basis


def test_bare_bus_error_gets_no_shm_size_without_shm_evidence(
    catalogue: Sequence[Signature],
) -> None:
    # A shell's "Bus error" alone is also what a memory-mapped file on a full or truncated
    # disk gives (NetDissect-Lite #10): the decide text says how to tell, and no size is given.
    top = diagnose_text("Bus error (core dumped)\n", catalogue).results[0]
    assert top.id == "sigbus-generic" and top.fix is not None
    assert top.fix.shm_size is None and top.fix.changes == ()
    assert "`df -h /dev/shm`" in top.decide and "mmap" in top.decide
    # With PyTorch multiprocessing frames in the same log, /dev/shm is the likely file
    # system and a size comes back: the sizing policy's default (no loader in the log).
    traced = (
        '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/reductions.py", '
        "line 560, in reduce_storage\n"
        "Bus error (core dumped)\n"
    )
    top = diagnose_text(traced, catalogue).results[0]
    assert top.id == "sigbus-generic" and top.fix is not None
    assert top.fix.shm_size is not None and top.fix.shm_size.bytes == GiB

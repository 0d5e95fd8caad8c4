"""Sizes read from a log are checked against what the failing job already had: a fix never
gives /dev/shm less than (or as much as) the size the log shows it had (df, a mount's size=,
a describe SizeLimit, --shm-size on a docker run line, Ray's free space) or a size it says
was requested and failed; a tool's capped hint gives way to the sizing policy."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import diagnose_text

from shmguard.estimate.policy import Policy, default_shm_size, shm_size_for
from shmguard.triage.model import Signature
from shmguard.units import GiB, MiB

BUS = (
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is "
    "possible that dataloader's workers are out of shared memory. Please try to raise your "
    "shared memory limit.\n"
)
NCCL = (
    "include/shm.h:48 NCCL WARN Error while creating shared memory segment "
    "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)\n"
)

#: Lines that show the /dev/shm the job had, and its size in bytes.
HAD = [
    ("shm              16G   16G     0 100% /dev/shm\n", 16 * GiB),
    ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=12582912k 0 0\n", 12 * GiB),
    ("    Medium:     Memory\n    SizeLimit:  10Gi\n", 10 * GiB),
    ("$ docker run --gpus all --shm-size=24g trainer:1.0 python train.py\n", 24 * GiB),
    ("$ docker run --gpus all --shm-size=512m trainer:1.0 python train.py\n", 512 * MiB),
]


def _size(d: object) -> int:
    from shmguard.triage.model import Diagnosis

    assert isinstance(d, Diagnosis)
    fix = d.results[0].fix
    assert fix is not None and fix.shm_size is not None
    return fix.shm_size.bytes


@pytest.mark.parametrize(("shown", "had"), HAD)
@pytest.mark.parametrize("failure", [BUS, NCCL], ids=["dataloader", "nccl"])
def test_never_at_or_below_what_the_job_had(
    catalogue: Sequence[Signature], shown: str, had: int, failure: str
) -> None:
    d = diagnose_text(shown + failure, catalogue)
    assert [f.bytes for f in d.facts if f.name == "shm_total"] == [had]
    size = _size(d)
    assert size > had
    # The policy's rule for a /dev/shm that ran short: twice it, or the signature's default
    # (a DataLoader failure: the sizing policy's own default, which the loader model replaces).
    sig = next(s for s in catalogue if s.id == d.results[0].id)
    assert sig.size is not None
    start = Policy().default_shm_size if sig.kind == "dataloader_shm" else sig.size.default
    assert size == default_shm_size(Policy(default_shm_size=start), too_small=had).bytes


RAY_CAPPED = (
    "WARNING services.py:1699 -- WARNING: The object store is using /tmp instead of /dev/shm "
    "because /dev/shm has only 67108864 bytes available. This will harm performance! You may "
    "be able to free up space by deleting files in /dev/shm. If you are inside a Docker "
    "container, you can increase /dev/shm size by passing '--shm-size=0.07gb' to 'docker run' "
    "(or add it to the run_options list in a Ray cluster config).\n"
)


def test_a_capped_hint_gives_way_to_the_policy(catalogue: Sequence[Signature]) -> None:
    # Ray sized its hint from a store it had capped at the 64 MiB /dev/shm: 0.07 GiB is within
    # the policy's 25% headroom of what the job had, so the signature's 16 GiB stands.
    d = diagnose_text(RAY_CAPPED, catalogue)
    fix = d.results[0].fix
    assert d.results[0].id == "ray-object-store-shm"
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 16 * GiB
    assert fix.shm_size.basis.startswith(
        "the usual starting point, more than twice the /dev/shm free space the log shows "
        "(64 MiB, line 1)"
    )
    assert fix.shm_size.basis.endswith(
        "; not the size the log itself suggests (~71.68 MiB, line 1): that is within 25% of the "
        "64 MiB the job already had, a tool's hint capped by what it found"
    )


def test_a_real_suggestion_is_kept(catalogue: Sequence[Signature]) -> None:
    # 10.24 GiB suggested for a 5 GiB /dev/shm: more than what the job had plus 25%.
    log = RAY_CAPPED.replace("67108864", "5368709120").replace("0.07gb", "10.24gb")
    fix = diagnose_text(log, catalogue).results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == 12 * GiB
    assert fix.shm_size.basis == "the size the log itself suggests (~10.24 GiB, line 1)"


def test_a_request_times_its_factor_must_exceed_what_the_job_had(
    catalogue: Sequence[Signature],
) -> None:
    # Triton asks 4 × its 64 MiB region (256 MiB) but the log shows a 1 GiB /dev/shm.
    log = (
        "shm               1.0G  1.0G     0 100% /dev/shm\n"
        "Unable to initialize shared memory key 'triton_python_backend_shm_region_3' to "
        "requested size (67108864 bytes). If you are running Triton inside docker, use "
        "'--shm-size' flag to control the shared memory region size.\n"
    )
    d = diagnose_text(log, catalogue)
    assert d.results[0].id == "triton-python-backend-shm"
    assert _size(d) == 2 * GiB
    fix = d.results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.basis == (
        "twice the /dev/shm size the log shows (1 GiB, line 1); not 4 × the 64 MiB requested "
        "at line 2: that is no more than the 1 GiB the job already had"
    )


def test_never_at_or_below_a_failed_request(catalogue: Sequence[Signature]) -> None:
    # UCX asked for 3.92 GiB in /dev/shm; the MPI starting point is 1 GiB.
    need = 4208440835
    log = (
        f"mm_posix.c:88   UCX  ERROR Not enough memory to write total of {need} bytes. Please "
        "check that /dev/shm or the directory you specified has more available memory.\n"
    )
    d = diagnose_text(log, catalogue)
    assert d.results[0].id == "mpi-shm-small"
    assert _size(d) == shm_size_for(need, Policy()).bytes == 5 * GiB
    fix = d.results[0].fix
    assert fix is not None and fix.shm_size is not None
    assert fix.shm_size.basis.endswith(
        "; raised to 5 GiB: the ~3.92 GiB requested at line 1 plus 25%"
    )


def test_the_users_size_is_taken_as_given(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(HAD[0][0] + BUS, catalogue, shm_size=GiB)
    assert _size(d) == GiB


DESCRIBE_OOM = (
    "Name: train\n"
    "    State:          Terminated\n"
    "      Reason:       OOMKilled\n"
    "      Exit Code:    137\n"
    "    Limits:\n"
    "      memory:  {mem}\n"
    "Volumes:\n"
    "  dshm:\n"
    "    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)\n"
    "    Medium:     Memory\n"
    "    SizeLimit:  {shm}\n"
)


@pytest.mark.parametrize(
    ("mem", "shm", "noted"), [("4Gi", "8Gi", True), ("4Gi", "4Gi", True), ("16Gi", "8Gi", False)]
)
def test_a_dev_shm_not_below_the_memory_limit_is_pointed_out(
    catalogue: Sequence[Signature], mem: str, shm: str, noted: bool
) -> None:
    # A new user's `kubectl describe` showed memory 4Gi and a dshm SizeLimit of 8Gi beside an
    # OOMKilled container: explain listed both and said nothing of the mismatch.
    d = diagnose_text(DESCRIBE_OOM.format(mem=mem, shm=shm), catalogue, runtime="kubernetes")
    notes = [n for n in d.notes if "not smaller than the memory limit" in n]
    assert bool(notes) is noted
    if noted:
        assert notes[0].startswith(f"/dev/shm ({shm[:-2]} GiB, line 11)")
        assert f"memory limit ({mem[:-2]} GiB, line 6)" in notes[0]

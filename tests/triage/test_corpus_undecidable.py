"""Corpus reports whose log alone does not decide the cause (``decidable: false``), and the
wordings behind them: explain names what fits, gives no /dev/shm size to the look-alikes,
and prints the check that decides (scored by ``shmguard.triage.scoring``).

Only reports outside heldout.txt are listed; the held-out third is never read here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from _triage_helpers import corpus_reports, diagnose_text, heldout_ids

from shmguard.triage.model import Signature
from shmguard.triage.scoring import score

HELDOUT = heldout_ids()
REPORTS = {i: r for i, r in corpus_reports().items() if i not in HELDOUT}

#: Report id -> (top signature, the report's check found in its ``decide`` text). The top
#: cause is not the label's kind, and explain says what decides it.
LEFT_OPEN = {
    # Triton started by Model Analyzer in its own container, sized by its own flag.
    "model-analyzer-749-inner-container-shm": ("triton-python-backend-shm", "shm-size"),
    # NCCL "unhandled system error" in a crash loop: leaked nccl-* segments.
    "llm-d-352-nccl-shm-leak-crashloop": ("nccl-system-error", "shm-size"),
    # UCX's receive FIFO, then a segfault: a pod without a /dev/shm volume.
    "ai-cloud-validation-643-ucx-fifo-segv": ("mpi-shm-small", "shm-size"),
    # The DataLoader bus error where the size set did not reach the container.
    "reppoints-18-ipc-host-modified-container": ("dataloader-bus-error", "shm-size"),
    "openpai-2656-bus-error-shmmb-job-config": ("dataloader-bus-error", "platform-setting"),
    # A bare "Bus error (core dumped)".
    "point-transformer-50-sharedarray-remount": ("sigbus-generic", "shm-size"),
    # df shows /dev/shm 87% used while the loader hangs.
    "pt-1355-docker-shm-deadlock": ("shm-full-df", "shm-size"),
    # A vLLM engine waiting for its DP coordinator: leftovers of an earlier job.
    "prime-rl-2331-slurm-stale-state-dp-hang": ("vllm-dp-coordinator-wait", "shm-files"),
    # A bare SIGBUS from a memory-mapped file on a full disk (shell and zsh wordings): no
    # size, and the decide text names `df -h` on the mapped file's file system.
    "netdissect-10-bus-error-mmap-disk": ("sigbus-generic", "disk-space"),
    "osmium-184-export-bus-error-mmap-index-small-fs": ("sigbus-generic", "disk-space"),
}

#: Report id -> the top signature, whose kinds include the label's.
RIGHT = {
    "pt-14768-open-shm-read-write-emfile": "torch-shm-open-failed",
    "mmdet-2406-killed-16-workers-60g": "dataloader-worker-exited",
    "moby-24040-shm-size-bytes-vs-sysv-ipcs": "sysv-shm-limits",
    "hf-datasets-2591-cache-500gb-disk": "disk-full-writer",
}


def _report(rid: str) -> dict[str, Any]:
    if rid not in REPORTS:  # held out or renamed: never read a held-out log
        pytest.skip(f"{rid} is not in the non-held-out corpus")
    return REPORTS[rid]


@pytest.mark.parametrize("rid", sorted(LEFT_OPEN))
def test_undecidable_report_is_left_open_with_its_check(
    rid: str, catalogue: Sequence[Signature]
) -> None:
    r = _report(rid)
    assert r["decidable"] is False
    d = diagnose_text(str(r["log"]), catalogue)
    s = score(r, d)
    assert (s.top, s.right) == (LEFT_OPEN[rid][0], False)
    assert (s.open, s.check, s.check_from) == (True, LEFT_OPEN[rid][1], "decide")


@pytest.mark.parametrize("rid", sorted(RIGHT))
def test_undecidable_report_gets_a_cause_of_its_kind(
    rid: str, catalogue: Sequence[Signature]
) -> None:
    r = _report(rid)
    s = score(r, diagnose_text(str(r["log"]), catalogue))
    assert (s.top, s.right) == (RIGHT[rid], True)
    assert s.lookalike and not s.shm_advice


# Wordings of the kinds above, beyond the reports' own lines.


def _top(text: str, catalogue: Sequence[Signature]) -> tuple[str, str, bool]:
    """(id, confidence, has a /dev/shm size) of the top result."""
    top = diagnose_text(text, catalogue).results[0]
    return top.id, top.confidence, top.fix is not None and top.fix.shm_size is not None


def test_paddle_worker_killed_is_memory_not_shm(catalogue: Sequence[Signature]) -> None:
    killed = (
        "SystemError: (Fatal) DataLoader process (pid 4242) exited is killed by signal: "
        "Killed.\n"
        "  It may be caused by insufficient shared storage space. This problem usually occurs "
        "when using docker as a development environment.\n"
    )
    d = diagnose_text(killed, catalogue)
    assert [r.id for r in d.results] == ["memory-oom-kill"]
    assert d.results[0].kind == "cgroup_oom" and d.results[0].fix is not None
    assert d.results[0].fix.shm_size is None
    bus = killed.replace("signal: Killed.", "signal: Bus error.")
    assert _top(bus, catalogue) == ("paddle-dataloader-shm", "high", True)


def test_torch_open_failure_without_errno_asks_for_the_fd_limit(
    catalogue: Sequence[Signature],
) -> None:
    for line in (
        "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode\n",
        "RuntimeError: unable to open shared memory object ... in read-write mode\n",
        "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode "
        "at /pytorch/aten/src/TH/THAllocator.c:342\n",
    ):
        d = diagnose_text(line, catalogue)
        assert _top(line, catalogue) == ("torch-shm-open-failed", "low", False), line
        assert "`ulimit -n`" in d.results[0].decide
    emfile = (
        "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode: "
        "Too many open files (24)\n"
    )
    assert _top(emfile, catalogue)[0] == "fd-limit"


def test_dataloader_kill_without_a_signal_name(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text("RuntimeError: DataLoader worker (pid 77) is killed by signal\n", catalogue)
    top = d.results[0]
    assert (top.id, top.confidence) == ("dataloader-worker-exited", "low")
    assert "Which signal" in top.decide and "dmesg" in top.decide
    assert top.fix is not None and top.fix.shm_size is None
    named = "RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed.\n"
    assert _top(named, catalogue)[0] == "memory-oom-kill"


def test_sysv_shmget_failures_are_not_dev_shm(catalogue: Sequence[Signature]) -> None:
    for text in (
        "FATAL:  could not create shared memory segment: No space left on device\n"
        "DETAIL:  Failed system call was shmget(key=5432001, size=56, 03600).\n",
        "[1591868130.001133] [n1:15407:0] sys.c:762 UCX  ERROR shmget(size=262144 flags=0x7b0) "
        "for user allocation failed: No space left on device, please check shared memory "
        "limits by 'ipcs -l'\n",
    ):
        d = diagnose_text(text, catalogue)
        assert d.results[0].id == "sysv-shm-limits", [r.id for r in d.results]
        assert d.results[0].confidence == "high" and d.results[0].kind == "other"
        # ENOSPC from shmget is a SysV limit: the bare ENOSPC is its consequence, and no
        # result offers a /dev/shm size.
        assert all(r.explained_by == "sysv-shm-limits" for r in d.results[1:])
        assert all(r.fix is None or r.fix.shm_size is None for r in d.results)
    # PostgreSQL's dynamic shared memory lives in /dev/shm: not this signature.
    dsm = (
        'ERROR:  could not resize shared memory segment "/PostgreSQL.1804289383" to 8388608 '
        "bytes: No space left on device\n"
    )
    assert "sysv-shm-limits" not in {r.id for r in diagnose_text(dsm, catalogue).results}


def test_ucx_receive_fifo_points_at_dev_shm(catalogue: Sequence[Signature]) -> None:
    text = (
        "[1700000000.1] [w0:71:0] mm_iface.c:812 UCX ERROR mm_iface failed to allocate "
        "receive FIFO\n"
        "[w0:71:0] Caught signal 11 (Segmentation fault: address not mapped to object)\n"
    )
    top = diagnose_text(text, catalogue).results[0]
    assert (top.id, top.confidence) == ("mpi-shm-small", "medium")
    assert "df -h /dev/shm" in top.decide


def test_nccl_system_error_names_leaked_segments(catalogue: Sequence[Signature]) -> None:
    text = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)\n"
    d = diagnose_text(text, catalogue)
    top = d.results[0]
    assert (top.id, top.confidence) == ("nccl-system-error", "low")
    assert "NCCL_DEBUG=INFO" in top.decide and "ls -la /dev/shm" in top.decide

"""Outcome classification on verbatim PyTorch transcripts, agreement with ``explain`` (one
classifier: the triage catalogue), and hang detection on a real tmpfs."""

from __future__ import annotations

import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from shmguard.measure.hang import HangDetector
from shmguard.measure.outcome import Outcome, alloc_errors, classify
from shmguard.measure.sampler import ShmSampler
from shmguard.measure.sandbox import Sandbox, SandboxSpec
from shmguard.triage import explain_streams
from shmguard.triage.text import classify_text, top_cause
from shmguard.units import MiB

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "measure" / "transcripts"


def _text(name: str) -> str:
    return (TRANSCRIPTS / name).read_bytes().decode("utf-8", "replace")


def test_crash_transcript_is_shm_exhausted() -> None:
    cause = classify(1, None, None, _text("S01_f32_bs32_nw4.txt"))
    assert cause.outcome is Outcome.SHM_EXHAUSTED
    assert cause.outcome.shm_related
    assert any(
        "unable to allocate shared memory(shm) for file </torch_" in e for e in cause.evidence
    )


def test_success_transcript_is_ok() -> None:
    cause = classify(0, None, None, _text("S02_f32_bs8_nw2.txt"))
    assert cause.outcome is Outcome.OK and cause.passed


def test_hang_transcript_stopped_by_the_detector_is_a_hang() -> None:
    cause = classify(137, "SIGKILL", "hang", _text("S09_numpy_24MB_nobatch_nw4.txt"))
    assert cause.outcome is Outcome.HANG
    # The feeder-thread traceback (`_feed` ... `reduce_storage` ... the failed allocation) is
    # what the catalogue's dataloader-feeder-failure reads; its evidence is the failed line.
    assert cause.signature == "dataloader-feeder-failure"
    assert "feeder thread" in cause.summary
    assert any("unable to allocate shared memory(shm)" in e for e in cause.evidence)


def test_dataloader_timeout_with_full_shm_is_a_hang() -> None:
    text = _text("S10_numpy_24MB_nobatch_nw4_timeout20.txt")
    assert any(r.id == "dataloader-timeout" for r in classify_text(text))
    cause = classify(1, None, None, text, shm_full=True)
    # The feeder traceback also says "unable to allocate": shm exhaustion either way.
    assert cause.outcome in (Outcome.SHM_EXHAUSTED, Outcome.HANG)
    assert cause.outcome.shm_related


def test_sigbus_transcript_with_nul_byte() -> None:
    text = _text("S11_f32_bs32_nw4_legacy_sigbus.txt")
    assert "\x00" in text
    cause = classify(1, None, None, text)
    assert cause.outcome is Outcome.SIGBUS
    assert all("\x00" not in e for e in cause.evidence)
    assert any("killed by signal: Bus error" in e for e in cause.evidence)


def test_signals_and_plain_failures() -> None:
    assert classify(135, "SIGBUS", None, "").outcome is Outcome.SIGBUS
    assert classify(137, "SIGKILL", None, "", memory_limited=True).outcome is Outcome.OOM_KILLED
    assert classify(137, "SIGKILL", None, "").outcome is Outcome.SIGNALED
    assert classify(3, None, None, "boom").outcome is Outcome.FAILED
    assert classify(124, None, "timeout", "").outcome is Outcome.TIMEOUT
    assert classify(124, None, "timeout", "", shm_full=True).outcome is Outcome.HANG
    started = classify(127, None, None, "", exec_error="nope: No such file or directory")
    assert started.outcome is Outcome.NOT_STARTED
    assert "nope: No such file or directory" in started.summary


def test_resize_failure_is_what_explain_says() -> None:
    # measure called this "failed" (none of its own patterns matched) while explain said
    # torch-shm-write-failed: one classifier now.
    text = (
        "RuntimeError: unable to resize file </torch_31_20_4> to the right size: "
        "Invalid argument (22)\n"
    )
    assert _explain_top(text) == "torch-shm-write-failed"
    cause = classify(1, None, None, text)
    assert cause.outcome is Outcome.SHM_EXHAUSTED
    assert cause.signature == "torch-shm-write-failed"
    assert cause.evidence == (text.strip(),)


@pytest.mark.parametrize("shm_full", [False, True])
def test_disk_full_on_a_named_path_is_not_shm_exhausted(shm_full: bool) -> None:
    # measure counted any "No space left on device" as shm exhaustion once /dev/shm looked
    # full; explain says disk-full, with no shm advice.
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/datasets/arrow_writer.py", line 580\n'
        "OSError: [Errno 28] No space left on device: "
        "'/data/cache/imagenet/train-00003-of-00064.arrow'\n"
    )
    cause = classify(1, None, None, text, shm_full=shm_full)
    assert cause.outcome is Outcome.FAILED
    assert not cause.outcome.shm_related
    assert cause.signature == "disk-full" == _explain_top(text)
    assert "A disk (not /dev/shm) is full" in cause.summary
    assert any("/data/cache/imagenet" in e for e in cause.evidence)
    # Exit 0 with the same line: the job tolerated a full disk; /dev/shm was not the problem.
    assert classify(0, None, None, text, shm_full=shm_full, strict=True).outcome is Outcome.OK
    assert alloc_errors(classify_text(text)) == ()


def test_shm_open_failure_is_not_shm_exhausted() -> None:
    # "unable to open shared memory object" needs no space: the errno decides (explain).
    text = (
        "RuntimeError: unable to open shared memory object </torch_1_2_3> in read-write mode: "
        "Too many open files (24)\n"
    )
    cause = classify(1, None, None, text, shm_full=True)
    assert cause.outcome is Outcome.FAILED
    assert cause.signature == "fd-limit" == _explain_top(text)


def test_bare_enospc_needs_a_full_shm() -> None:
    # Which file system is not said: the run's own sampler decides.
    text = "cp: error writing 'standard output': No space left on device\n"
    full = classify(1, None, None, text, shm_full=True)
    assert full.outcome is Outcome.SHM_EXHAUSTED
    assert full.signature == "enospc-bare"
    room = classify(1, None, None, text, shm_full=False)
    assert room.outcome is Outcome.FAILED
    assert room.signature == "enospc-bare"
    assert "/dev/shm did not fill up" in room.summary


def test_oom_text_and_worker_exit_evidence() -> None:
    text = (
        "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed. \n"
        "RuntimeError: DataLoader worker (pid(s) 4321) exited unexpectedly\n"
    )
    cause = classify(1, None, None, text)
    assert cause.outcome is Outcome.OOM_KILLED
    assert cause.signature == "memory-oom-kill"
    assert cause.evidence == (
        "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed.",
        "RuntimeError: DataLoader worker (pid(s) 4321) exited unexpectedly",
    )
    counted = classify(1, None, None, text, oom_kills=1)
    assert counted.outcome is Outcome.OOM_KILLED
    assert counted.signature == "memory-oom-kill"
    assert counted.evidence[-1] == "memory cgroup: oom_kill 1"


def _explain_top(text: str) -> str | None:
    """What `shmguard explain` reports first for ``text`` (its own entry point, a stream)."""
    diagnosis = explain_streams([("log", io.BytesIO(text.encode()))])
    causes = [r for r in diagnosis.results if r.role == "cause" and r.explained_by is None]
    return causes[0].id if causes else None


_FEEDER = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.11/multiprocessing/queues.py", line 244, in _feed\n'
    "    obj = _ForkingPickler.dumps(obj)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/reductions.py", '
    "line 613, in reduce_storage\n"
    "    fd, size = storage._share_fd_cpu_()\n"
    "RuntimeError: unable to allocate shared memory(shm) for file </torch_5_6_0>: "
    "No space left on device (28)\n"
)

#: (name, output text): one per wording measure used to match itself, plus the failures that
#: are not /dev/shm.
AGREEMENT = [
    ("S01-alloc", "S01_f32_bs32_nw4.txt"),
    ("S10-feeder-timeout", "S10_numpy_24MB_nobatch_nw4_timeout20.txt"),
    ("S11-sigbus", "S11_f32_bs32_nw4_legacy_sigbus.txt"),
    ("feeder", _FEEDER),
    (
        "write-to-file",
        "RuntimeError: unable to write to file </torch_9_8_7>: No space left on device (28)\n",
    ),
    ("resize-file", "RuntimeError: unable to resize file </torch_31_20_4> to the right size\n"),
    (
        "open-object",
        "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode\n",
    ),
    (
        "bus-error-hint",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by "
        "insufficient shared memory (shm).\n",
    ),
    (
        "bus-error-cut",
        "2024-05-02T10:11:12Z stderr F  caused by insufficient shared memory (shm).\n",
    ),
    (
        "out-of-shm",
        "RuntimeError: ... dataloader's workers are out of shared memory. Please try to "
        "raise your shared memory limit.\n",
    ),
    (
        "shell-bus-error",
        "run.sh: line 3:  4242 Bus error               (core dumped) python train.py\n",
    ),
    ("sigkill", "RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed. \n"),
    ("timeout", "RuntimeError: DataLoader timed out after 600 seconds\n"),
    ("worker-exit", "RuntimeError: DataLoader worker (pid(s) 7, 8) exited unexpectedly\n"),
    ("enospc-bare", "head: error writing 'standard output': No space left on device\n"),
    ("enospc-shm-path", "OSError: [Errno 28] No space left on device: '/dev/shm/cache_0001.npy'\n"),
    (
        "disk-full",
        "OSError: [Errno 28] No space left on device: '/data/cache/train-00001-of-00004.arrow'\n",
    ),
    ("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"),
    (
        "nccl-segment",
        "include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n",
    ),
    ("nothing", "epoch 1 loss 0.31\nepoch 2 loss 0.27\n"),
]


@pytest.mark.parametrize("shm_full", [False, True], ids=["room", "full"])
@pytest.mark.parametrize(("name", "text"), AGREEMENT, ids=[a[0] for a in AGREEMENT])
def test_measure_names_the_cause_explain_names(name: str, text: str, shm_full: bool) -> None:
    output = _text(text) if text.endswith(".txt") else text
    cause = classify(1, None, None, output, shm_full=shm_full)
    assert cause.signature == _explain_top(output), (name, cause)
    assert cause.signature == getattr(top_cause(classify_text(output)), "id", None)


class _Sampler(SimpleNamespace):
    """What HangDetector reads of a ShmSampler: total, used and peak bytes, and the largest
    ``torch_*`` block the owner scans saw (``largest``, default none) and the directory it
    lists for failed allocations (``path``, default one that does not exist); ``pids``, the
    process tree (default None: not known, so every new failed allocation counts)."""

    path = "/nonexistent/shm"
    pids = None

    def torch_seen(self) -> tuple[frozenset[str], int]:
        return frozenset(), getattr(self, "largest", 0)


def test_hang_detector_reads_failures_with_the_catalogue() -> None:
    near = _Sampler(total=64 * MiB, used=64 * MiB - 8192, peak=64 * MiB - 8192)
    det = HangDetector(near, full_margin=MiB)  # type: ignore[arg-type]
    det.saw_output("stdout", b"epoch 1 step 5 loss 0.3\n" * 50)
    assert not det.alloc_failed
    # A full disk is not a failed shm allocation (explain: disk-full).
    det.saw_output("stderr", b"OSError: [Errno 28] No space left on device: '/data/x.arrow'\n")
    assert not det.alloc_failed
    # The torch message split across two chunks still counts.
    det.saw_output("stderr", b"RuntimeError: unable to allocate shared mem")
    det.saw_output("stderr", b"ory(shm) for file </torch_1_2_0>: No space left on device (28)\n")
    assert det.alloc_failed
    assert det.full()
    # Far from full, the output is not read at all.
    roomy = _Sampler(total=64 * MiB, used=MiB, peak=MiB)
    idle = HangDetector(roomy)  # type: ignore[arg-type]
    idle.saw_output("stderr", b"RuntimeError: unable to allocate shared memory(shm)\n")
    assert not idle.alloc_failed


def test_a_missed_peak_is_full_within_one_torch_block() -> None:
    # Figures of a run --watch that never called a stall (hang_loader.py, 24 MiB items, four
    # workers, 64 MiB): the 10 ms sampler missed the failed allocation's moment at the limit
    # (peak 5.6 MiB below it, above the 2% floor), 16 MiB stayed free. Less than one block
    # the loader allocates is free: near full, so the feeder's traceback is read.
    feeder = _text("S09_numpy_24MB_nobatch_nw4.txt").encode()
    used, peak = 50_413_568, 61_476_864
    blind = HangDetector(_Sampler(total=64 * MiB, used=used, peak=peak))  # type: ignore[arg-type]
    blind.saw_output("stderr", feeder)
    assert not blind.full() and not blind.alloc_failed
    seen = _Sampler(total=64 * MiB, used=used, peak=peak, largest=24 * MiB)
    det = HangDetector(seen)  # type: ignore[arg-type]
    assert det.margin() == 24 * MiB
    det.saw_output("stderr", feeder)
    assert det.alloc_failed and det.full()
    # A roomier /dev/shm (more than a block free) is not full, whatever the output says.
    roomy = _Sampler(total=128 * MiB, used=used, peak=peak, largest=24 * MiB)
    spare = HangDetector(roomy)  # type: ignore[arg-type]
    spare.saw_output("stderr", feeder)
    assert not spare.full()


def test_a_request_larger_than_the_free_space_is_full(tmp_path: Path) -> None:
    # hang_loader.py's 24 MiB items in a 16 MiB /dev/shm: no allocation ever succeeds, the
    # peak stays at 80 KiB, the failed requests' zero-block files are all that shows it. A
    # file that was there before is an old leftover (the baseline) and does not count.
    (tmp_path / "torch_7_1_0").write_bytes(b"")
    os.truncate(tmp_path / "torch_7_1_0", 32 * MiB)
    box = _Sampler(total=16 * MiB, used=80 * 1024, peak=80 * 1024, path=str(tmp_path))
    clock = [100.0]
    det = HangDetector(box, after=3.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert det() is None  # the baseline
    assert not det.full() and det.failed_request == 0
    (tmp_path / "torch_8_2_0").write_bytes(b"")
    os.truncate(tmp_path / "torch_8_2_0", 24 * MiB)
    assert not det.full()  # listed once a second while not near full
    clock[0] += 1.0
    assert det.full()
    assert (det.failed_blocks, det.failed_request, det.margin()) == (1, 24 * MiB, 24 * MiB)


def test_a_failed_allocation_counts_while_the_process_that_made_it_runs(tmp_path: Path) -> None:
    # A job that got past a failed allocation (its loader's workers shut down, the data loaded
    # again with num_workers=0) keeps the zero-block file; with the tree known, only a live
    # creator's failure is evidence (tests/measure/test_run_watch_recovered.py runs it).
    me = os.getpid()
    box = _Sampler(total=16 * MiB, used=80 * 1024, peak=80 * 1024, path=str(tmp_path))
    box.pids = lambda: [me]
    clock = [100.0]
    det = HangDetector(box, after=3.0, clock=lambda: clock[0])  # type: ignore[arg-type]
    assert det() is None  # the baseline: nothing there
    # 4194305: above the kernel's largest pid_max (2^22, proc(5)), no process has it
    for name in ("torch_4194305_1_0", "torch_x"):
        (tmp_path / name).write_bytes(b"")
        os.truncate(tmp_path / name, 24 * MiB)
    clock[0] += 1.0
    assert not det.full() and (det.failed_blocks, det.failed_request) == (0, 0)
    (tmp_path / f"torch_{me}_2_0").write_bytes(b"")
    os.truncate(tmp_path / f"torch_{me}_2_0", 24 * MiB)
    clock[0] += 1.0
    assert det.full() and (det.failed_blocks, det.failed_request) == (1, 24 * MiB)
    # The creator exits while /dev/shm stays near full at the peak: the evidence goes within a
    # second (the full state was kept without a new listing, and a job that got past the
    # failure was stopped once it waited quietly).
    box.peak = 16 * MiB
    box.pids = lambda: []
    assert det.full()  # listed under a second ago
    clock[0] += 1.0
    assert not det.full() and det.failed_blocks == 0
    # ... and a failure the job printed is no evidence either once every process that made a
    # failed allocation has exited (the job logged it and got past it)
    det.saw_output(
        "stderr",
        b"RuntimeError: unable to allocate shared memory(shm) for file </torch_4194305_1_0>: "
        b"No space left on device (28)\n",
    )
    assert det.alloc_failed and det.failures_past and not det.full()
    box.pids = lambda: [me]
    clock[0] += 1.0
    assert det.full() and not det.failures_past


@pytest.mark.timeout(60)
def test_hang_detector_stops_an_idle_job_on_a_full_tmpfs(
    root_only: None, no_leftovers: None
) -> None:
    # Fill an 8 MiB tmpfs, then sit idle: shm full + no output + no CPU = hang.
    script = "head -c 8388608 /dev/zero > /dev/shm/fill 2>/dev/null; echo filled; exec sleep 60"
    spec = SandboxSpec(("sh", "-c", script), 8 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start()
        sampler = ShmSampler(box.shm_path, interval=0.01, pids=box.tree_pids, owner_interval=0.1)
        sampler.start()
        detector = HangDetector(sampler, after=1.0)
        result = box.wait(timeout=30, stop_check=detector)
        timeline = sampler.stop()
    assert result.stopped_by == "hang"
    assert result.signal_name == "SIGKILL"
    assert timeline.peak == 8 * MiB
    assert b"filled" in result.stdout_tail


@pytest.mark.timeout(60)
def test_hang_detector_leaves_a_busy_job_alone(root_only: None) -> None:
    # Full tmpfs but burning CPU: not a hang; it ends by itself.
    script = (
        "head -c 8388608 /dev/zero > /dev/shm/fill 2>/dev/null; "
        "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"
    )
    spec = SandboxSpec(("sh", "-c", script), 8 * MiB)
    with Sandbox(spec, output="capture") as box:
        box.start()
        sampler = ShmSampler(box.shm_path, interval=0.01, pids=box.tree_pids, owner_interval=0.1)
        sampler.start()
        result = box.wait(timeout=40, stop_check=HangDetector(sampler, after=0.5))
        sampler.stop()
    assert result.stopped_by is None
    assert result.exit_status == 0


@pytest.mark.parametrize("memory_limited", [False, True])
def test_a_sigkill_after_an_ignored_forwarded_sigterm_says_shmguard_sent_it(
    memory_limited: bool,
) -> None:
    # issue 24 item 8: `measure` said "killed by SIGKILL" (or "most likely by the OOM killer"
    # under a memory limit) when the sandbox escalated a forwarded SIGTERM the command ignored
    cause = classify(
        137,
        "SIGKILL",
        "SIGTERM ignored for 10s",  # Sandbox.wait's stopped_by
        b"",
        memory_limited=memory_limited,
        oom_kills=0,
    )
    assert cause.outcome is Outcome.SIGNALED
    assert "shmguard sent it after the SIGTERM it forwarded was ignored for 10s" in cause.summary

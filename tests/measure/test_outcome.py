"""Outcome classification on verbatim PyTorch transcripts, and hang detection on a real tmpfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.measure.outcome import HangDetector, Outcome, classify, scan_output
from shmguard.measure.sampler import ShmSampler
from shmguard.measure.sandbox import Sandbox, SandboxSpec
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
    assert any("_feed" in e or "reduce_storage" in e for e in cause.evidence)


def test_dataloader_timeout_with_full_shm_is_a_hang() -> None:
    text = _text("S10_numpy_24MB_nobatch_nw4_timeout20.txt")
    assert "timeout" in scan_output(text)
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

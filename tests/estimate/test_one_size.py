"""One need gives one size everywhere: measure, probe, doctor and explain size through the one
size decision (shmguard.estimate.decide) and its policy (shmguard.estimate.policy); one loader
gets one size from plan, measure, probe, run --watch, tune and recommend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.estimate import (
    ALERT_PERCENT,
    Policy,
    clean_size,
    default_shm_size,
    memory_limit_for,
    recommend,
    shm_size_for,
)
from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.model import Setting
from shmguard.triage import explain_streams
from shmguard.units import GiB, MiB, round_up


def _shm_change(fix: object) -> int:
    changes = getattr(fix, "changes", ())
    (value,) = [c.value for c in changes if c.setting is Setting.SHM_SIZE]
    return value


@pytest.mark.parametrize("need", [100 * MiB, 1331 * MiB, 3 * GiB + 5])
def test_measure_probe_and_doctor_give_one_size_for_one_need(
    need: int, fixture_root: Callable[[str], Path]
) -> None:
    expected = shm_size_for(need).bytes
    assert recommend(need, "measured peak").shm_size == expected
    assert recommend(need, "probed minimum").shm_size == expected
    root = fixture_root("docker-v2-default")
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    used = facts.shm.used.value or 0
    report = diagnose(facts, DoctorOptions(require=need - used))
    env002 = next(f for f in report.findings if f.code == "ENV002")
    assert _shm_change(env002.fix) == expected


def test_1_3_gib_is_1_5_gib_without_headroom_and_1_75_gib_with_it() -> None:
    # The example: measure gave 1.5 GiB, explain 2 GiB, doctor 1.3 GiB for one need.
    assert clean_size(int(1.3 * GiB)) == int(1.5 * GiB)
    assert shm_size_for(int(1.3 * GiB)).bytes == int(1.75 * GiB)


def test_a_shm_that_ran_short_gets_twice_its_size_in_doctor_and_explain(
    fixture_root: Callable[[str], Path],
) -> None:
    # doctor: a 2 GiB /dev/shm 95% full (ENV003).
    root = fixture_root("k8s-v2-sized-full")
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    env003 = next(f for f in diagnose(facts).findings if f.code == "ENV003")
    total = facts.shm.total.value
    assert total == 2 * GiB
    expected = default_shm_size(too_small=total).bytes
    assert expected == 4 * GiB
    assert _shm_change(env003.fix) == expected
    # explain: the same 2 GiB /dev/shm full in a df line, then ENOSPC there (starting point
    # 2 GiB: twice the size wins).
    import io

    log = (
        b"Filesystem      Size  Used Avail Use% Mounted on\n"
        b"shm             2.0G  2.0G     0 100% /dev/shm\n"
        b"OSError: [Errno 28] No space left on device: '/dev/shm/cache.bin'\n"
    )
    d = explain_streams([("log", io.BytesIO(log))], runtime="kubernetes")
    top = next(r for r in d.results if r.fix is not None and r.fix.shm_size is not None)
    assert top.fix is not None and top.fix.shm_size is not None
    assert top.fix.shm_size.bytes == expected


def test_default_is_capped_by_the_memory_limit_after_the_margin() -> None:
    assert default_shm_size().bytes == GiB
    capped = default_shm_size(memory_limit=int(1.5 * GiB))
    assert capped.bytes == 512 * MiB and "capped" in capped.basis
    assert default_shm_size(memory_limit=GiB).bytes == 64 * MiB
    assert default_shm_size(Policy(default_shm_size=2 * GiB)).bytes == 2 * GiB


def test_a_default_never_shrinks_or_keeps_the_shm_that_ran_short() -> None:
    # A 1.2 GiB limit leaves 192 MiB after the margin: less than the 200 MiB that ran short.
    ran_short = default_shm_size(memory_limit=int(1.2 * GiB), too_small=200 * MiB)
    assert ran_short.bytes == GiB and "must grow" in ran_short.basis
    # 512 MiB leaves nothing beside the margin: 64 MiB would change nothing.
    assert default_shm_size(memory_limit=512 * MiB, current=64 * MiB).bytes == GiB
    # A cap above what is there now still applies.
    assert default_shm_size(memory_limit=int(1.5 * GiB), current=64 * MiB).bytes == 512 * MiB


def test_memory_limits_round_to_what_people_write() -> None:
    from shmguard.estimate.policy import clean_memory

    assert clean_memory(1680 * MiB) == 1792 * MiB
    assert clean_memory(9 * GiB - 64 * MiB) == 9 * GiB
    assert clean_memory(33 * GiB) == 33 * GiB
    assert memory_limit_for(GiB, current_limit=8 * GiB, current_shm=64 * MiB) == 9 * GiB


# --- one loader, one size: plan, measure, probe, run --watch, tune and recommend ----------

#: The issue's loader: float32 3x256x256 samples, batch 32, 4 workers, a fast consumer.
LOADER = {"num_workers": 4, "batch_size": 32, "sample_shape": (3, 256, 256)}
BATCH = 32 * 3 * 256 * 256 * 4  # the collated batch tensor the owner scans see: 24 MiB
#: What one run of the fast consumer peaked at: below the model's steady level (its queues
#: never filled), as the issue's run did.
FAST_PEAK = 192 * MiB


def _timeline(peak: int) -> object:
    from shmguard.measure.timeline import Timeline

    return Timeline(
        "/dev/shm", 0.002, 12 * GiB, 0, peak, 2.7, ((0.0, 0), (2.7, peak)), 1000, 0.002,
        0.01, False, torch_largest=BATCH, torch_creators=4,
    )  # fmt: skip


def test_one_loader_gets_one_size_from_every_command() -> None:
    from shmguard.estimate import PlanRequest, make_plan
    from shmguard.estimate.observed import observed_loader
    from shmguard.measure.probe import start_level
    from shmguard.measure.run import passed_run_recommendation
    from shmguard.measure.watched import model_size
    from shmguard.model.fact import Fact
    from shmguard.monitor.rightsize import RightsizeOptions, WorkloadHistory, size_history
    from shmguard.monitor.workloads import WorkloadRef
    from shmguard.torch.tuning.api import container_settings
    from shmguard.torch.tuning.model import Budget, Trial, TrialConfig

    plan = make_plan(PlanRequest(**LOADER))  # type: ignore[arg-type]
    assert plan.shm is not None
    pred = plan.prediction
    sizes: dict[str, int | None] = {"plan": plan.shm.bytes}
    # measure: a run that passed with that loader seen by the owner scans
    timeline = _timeline(FAST_PEAK)
    measured = passed_run_recommendation(timeline, Fact.unknown("not measured"))  # type: ignore[arg-type]
    sizes["measure"] = measured.shm_size
    # probe: the same recommendation from its probed minimum (a minimum at the peak the
    # measuring run reached); its search starts at that peak, below the steady level
    probed = passed_run_recommendation(
        timeline,  # type: ignore[arg-type]
        Fact.unknown("not measured"),
        need=FAST_PEAK,
        need_basis="probed minimum",
    )
    sizes["probe"] = probed.shm_size
    seen = observed_loader(4, BATCH, FAST_PEAK)
    assert seen is not None and seen.prediction.peak == pred.peak
    assert start_level(seen, FAST_PEAK) == round_up(int(FAST_PEAK * 1.05), MiB)
    # run --watch (and watch): the model for the loader the watcher saw
    watched = model_size(4, BATCH, FAST_PEAK)
    assert watched is not None
    sizes["run --watch"] = watched.bytes
    # tune: a trial of that configuration that peaked at FAST_PEAK
    trial = Trial(
        TrialConfig(4, 2), "ok", peak_shm=FAST_PEAK, predicted_peak=pred.peak, memory_peak=None
    )
    sizes["tune"] = container_settings(trial, Budget(4 * GiB, None, 4.0), Policy()).shm_size
    # recommend: Prometheus saw the job's peak, the model's peak (a stall filled the queues)
    history = WorkloadHistory(
        "ml", WorkloadRef("Job", "train", "owner"), "trainer", "dshm", ("train-0",),
        pred.peak, None, 64 * MiB, None, None, None, None, 1000, 0.0, 7 * 86400.0,
    )  # fmt: skip
    sizes["recommend"] = size_history(history, RightsizeOptions()).recommendation.shm_size
    assert set(sizes.values()) == {320 * MiB}, sizes
    # the size keeps the steady level at or below 80% and the peak under 80% (watch's
    # threshold and the ShmguardShmAlmostFull alert)
    assert pred.steady * 100 <= 320 * MiB * ALERT_PERCENT
    assert pred.peak * 100 < 320 * MiB * ALERT_PERCENT
    # and every basis says the model's peak got the headroom
    assert "~240.12 MiB + 25% headroom" in measured.shm_basis
    assert "~240.12 MiB + 25% headroom" in plan.shm.basis


def test_plan_prints_that_size_for_the_loader() -> None:
    import os
    import subprocess
    import sys

    argv = ["--batch-size", "32", "--sample-shape", "3,256,256", "--num-workers", "4"]
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "plan", *argv, "--dtype", "float32"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "320 MiB  (predicted peak ~240.12 MiB + 25% headroom" in done.stdout
    assert "docker run --shm-size=320m IMAGE ..." in done.stdout

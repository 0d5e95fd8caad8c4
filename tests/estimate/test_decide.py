"""The one /dev/shm size decision (shmguard.estimate.decide.choose_shm): each rung of the
precedence, the combination rule, the strict 80% relation and the "no room" answer."""

from __future__ import annotations

import pytest

from shmguard.estimate.dataloader import LoaderSpec, predict
from shmguard.estimate.decide import (
    Documented,
    LogSize,
    Need,
    RanShort,
    ShmEvidence,
    choose_shm,
)
from shmguard.estimate.policy import ALERT_PERCENT, SOURCES, Policy, Sized, memory_limit_for
from shmguard.units import DOCKER_DEFAULT_SHM, GiB, MiB

#: Every slot filled: each test below removes the slots above the one it checks.
FULL = ShmEvidence(
    flag=3 * GiB,
    configured=("shmguard.io/shm-size", "2g"),
    log=LogSize(12 * GiB, "the size the log itself suggests (12 GiB, line 3)"),
    request=Need(100 * MiB, "requested at line 4"),
    model=Need(240 * MiB, "predicted peak"),
    measured=Need(200 * MiB, "measured peak"),
    ran_short=RanShort(64 * MiB),
    documented=Documented(8 * GiB, "NCCL with many ranks", floor=GiB),
)


def test_the_flag_is_taken_as_given() -> None:
    got = choose_shm(FULL)
    assert (got.bytes, got.source, got.basis) == (3 * GiB, "flag", "the size given with --shm-size")


def test_the_annotation_comes_next_in_both_syntaxes() -> None:
    ev = ShmEvidence(**{**FULL.__dict__, "flag": None})
    assert choose_shm(ev) == Sized(2 * GiB, "shmguard.io/shm-size=2g", "configured")
    k8s = ShmEvidence(configured=("shmguard.io/shm-size", "2G"))
    assert choose_shm(k8s).bytes == 2_000_000_000
    assert choose_shm(ShmEvidence(configured=("shm", 5 * MiB))).bytes == 5 * MiB


@pytest.mark.parametrize("text", ["64m", "0.5", "nonsense", "0"])
def test_an_unreadable_annotation_is_a_problem_and_the_next_slot_decides(text: str) -> None:
    got = choose_shm(ShmEvidence(configured=("shmguard.io/shm-size", text)))
    assert got.source == "default" and got.bytes == GiB
    (problem,) = got.problems
    assert problem.startswith(f"shmguard.io/shm-size={text!r} ignored")
    # the problem is kept whatever decides afterwards
    measured = ShmEvidence(
        configured=("shmguard.io/shm-size", text), measured=Need(100 * MiB, "measured peak")
    )
    assert choose_shm(measured).problems == (problem,)


def test_a_log_size_beats_the_model_and_measurements() -> None:
    ev = ShmEvidence(**{**FULL.__dict__, "flag": None, "configured": None})
    got = choose_shm(ev)
    assert (got.bytes, got.source) == (12 * GiB, "log")


def test_a_log_hint_within_what_the_job_had_plus_headroom_is_a_capped_hint() -> None:
    # Ray suggests 0.07gb when a 64 MiB /dev/shm capped its object store.
    hint = LogSize(75 * MiB, "the size the log itself suggests (75 MiB, line 2)")
    got = choose_shm(ShmEvidence(log=hint, ran_short=RanShort(64 * MiB)))
    assert got.source == "default" and got.bytes == GiB
    assert "a tool's hint capped by what it found" in got.basis
    # a stated size (not a hint) only has to exceed what the job had
    stated = LogSize(75 * MiB, "1.1 × the 68 MiB requested at line 2, rounded up", hint=False)
    got = choose_shm(ShmEvidence(log=stated, ran_short=RanShort(64 * MiB)))
    assert (got.bytes, got.source) == (80 * MiB, "log")


def test_a_failed_request_is_a_lower_bound() -> None:
    req = Need(3 * GiB, "requested at line 4")
    got = choose_shm(ShmEvidence(request=req, documented=Documented(GiB, "a starting point")))
    assert got.source == "request"
    assert got.bytes > 3 * GiB and got.bytes * ALERT_PERCENT > 3 * GiB * 100
    assert "the 3 GiB requested at line 4 plus 25%" in got.basis
    # a size above the request stands
    assert choose_shm(ShmEvidence(request=Need(100 * MiB, "requested"))).source == "default"


def test_model_and_measured_peaks_combine_before_headroom() -> None:
    spec = LoaderSpec(24 * MiB + 8192, 4, 2)  # float32 3x256x256, batch 32, 4 workers
    peak = predict(spec).peak
    model = Need(peak, "predicted peak")
    for measured in (150 * MiB, 200 * MiB):
        got = choose_shm(ShmEvidence(model=model, measured=Need(measured, "measured peak")))
        assert (got.bytes, got.source) == (320 * MiB, "model")
        assert "the larger of measured peak" in got.basis
    # the model alone gives the same size: the bound is no floor after headroom
    assert choose_shm(ShmEvidence(model=model)).bytes == 320 * MiB
    # a measured peak above the model's wins and gets the headroom itself
    got = choose_shm(ShmEvidence(model=model, measured=Need(300 * MiB, "measured peak")))
    assert (got.bytes, got.source) == (384 * MiB, "measured")


def test_model_and_measurements_beat_a_shm_that_ran_short() -> None:
    ev = ShmEvidence(measured=Need(100 * MiB, "measured peak"), ran_short=RanShort(64 * MiB))
    got = choose_shm(ev)
    assert (got.bytes, got.source) == (128 * MiB, "measured")
    # but never at or below it
    low = ShmEvidence(measured=Need(40 * MiB, "measured peak"), ran_short=RanShort(64 * MiB))
    got = choose_shm(low)
    assert got.bytes > 64 * MiB and got.source == "ran-short"


@pytest.mark.parametrize("need", [10 * MiB, 100 * MiB, 240 * MiB, 256 * MiB, 4 * GiB, 7 * GiB])
def test_a_size_from_a_need_keeps_it_strictly_under_the_alert_threshold(need: int) -> None:
    got = choose_shm(ShmEvidence(measured=Need(need, "measured peak")))
    assert need * 100 < got.bytes * ALERT_PERCENT


def test_a_need_exactly_at_80_percent_gets_one_more_step() -> None:
    # 256 MiB + 25% = 320 MiB exactly: 80% full, where watch fires.
    got = choose_shm(ShmEvidence(measured=Need(256 * MiB, "measured peak")))
    assert got.bytes == 384 * MiB and "one step more to 384 MiB" in got.basis
    # a smaller configured headroom accepts a fuller /dev/shm
    tight = choose_shm(ShmEvidence(measured=Need(256 * MiB, "m")), Policy(headroom=0.0))
    assert tight.bytes == 256 * MiB


def test_a_shm_that_ran_short_gets_twice_its_size() -> None:
    got = choose_shm(ShmEvidence(ran_short=RanShort(2 * GiB)))
    assert (got.bytes, got.source) == (4 * GiB, "ran-short")
    assert got.basis == "twice the 2 GiB that ran short"


def test_a_documented_size_and_its_floor() -> None:
    doc = Documented(8 * GiB, "NCCL with many local ranks", floor=GiB)
    got = choose_shm(ShmEvidence(documented=doc))
    assert (got.bytes, got.source) == (8 * GiB, "documented")
    assert got.basis == "a starting point: NCCL with many local ranks"
    # twice a small /dev/shm is less than the documented starting point: it stands
    got = choose_shm(ShmEvidence(documented=doc, ran_short=RanShort(64 * MiB)))
    assert (got.bytes, got.source) == (8 * GiB, "documented")
    # the floor raises a smaller log size
    small = LogSize(100 * MiB, "the size the log itself suggests (100 MiB, line 1)")
    got = choose_shm(ShmEvidence(log=small, documented=doc))
    assert got.bytes == GiB and "the least that usually helps here" in got.basis


def test_the_default_is_capped_by_the_memory_limit() -> None:
    got = choose_shm(ShmEvidence(memory_limit=int(1.5 * GiB), current=DOCKER_DEFAULT_SHM))
    assert (got.bytes, got.source, got.memory_limit) == (512 * MiB, "default", None)


def test_no_room_under_the_memory_limit_answers_with_the_limit_to_raise_to() -> None:
    got = choose_shm(ShmEvidence(memory_limit=GiB, current=DOCKER_DEFAULT_SHM))
    assert got.source == "default"
    # the size to ship with the raised limit, and the limit: the room beside the current
    # /dev/shm (at least the 1 GiB margin) plus the new size, rounded
    assert got.bytes == GiB and got.memory_limit == 2 * GiB
    assert "the limit must grow" in got.basis


def test_a_need_over_the_memory_limit_is_not_cut_but_answers_no_room() -> None:
    # A need is never cut to fit; where the limit cannot hold it beside the 1 GiB margin the
    # answer is the limit to raise to (before issue 19's fix A: a 640 MiB size and None, a
    # /dev/shm that lets shm alone get the 1 GiB container OOM-killed).
    for slot in ("measured", "model"):
        need = Need(500 * MiB, "m")
        ev = ShmEvidence(memory_limit=GiB, **{slot: need})  # type: ignore[arg-type]
        got = choose_shm(ev)
        assert (got.bytes, got.source) == (640 * MiB, slot)
        assert got.memory_limit == memory_limit_for(640 * MiB, current_limit=GiB)
        assert got.memory_limit == 1792 * MiB  # the 1 GiB margin + 640 MiB, rounded
    # a failed request raises the size; the raised size is checked too
    req = choose_shm(
        ShmEvidence(request=Need(3 * GiB, "requested at line 3"), memory_limit=4 * GiB)
    )
    assert req.source == "request" and req.memory_limit is not None
    assert req.memory_limit >= req.bytes + Policy().memory_margin
    # a log's size too
    log = LogSize(6 * GiB, "the size the log itself suggests (6 GiB, line 1)")
    assert choose_shm(ShmEvidence(log=log, memory_limit=4 * GiB)).memory_limit is not None
    # a need that fits beside the margin, or no limit known (measure, plan, probe): no answer
    fits = ShmEvidence(model=Need(500 * MiB, "m"), memory_limit=2 * GiB)
    assert choose_shm(fits).memory_limit is None
    assert choose_shm(ShmEvidence(model=Need(60 * GiB, "m"))).memory_limit is None
    # the flag and a configured size are taken as given, whatever the limit
    assert choose_shm(ShmEvidence(flag=8 * GiB, memory_limit=GiB)).memory_limit is None
    conf = ShmEvidence(configured=("shmguard.io/shm-size", "8Gi"), memory_limit=GiB)
    assert choose_shm(conf).memory_limit is None


def test_every_source_is_in_the_closed_set() -> None:
    with pytest.raises(ValueError, match="unknown size source"):
        Sized(1, "x", "guess")
    assert SOURCES[0] == "flag" and SOURCES[-1] == "default"

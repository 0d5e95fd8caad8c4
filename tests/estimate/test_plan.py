"""``shmguard plan``'s library: the seed configuration's figures, sizes, ranks, pinning, fit."""

from __future__ import annotations

import pytest

from shmguard.estimate import Policy, padded_bytes
from shmguard.estimate.plan import (
    WORKERS_LIMIT,
    PlanRequest,
    check_fit,
    make_plan,
    parse_shape,
    workers_that_fit,
)
from shmguard.model.fix import Setting
from shmguard.units import PAGE_SIZE, GiB, MiB

SEED = PlanRequest(num_workers=4, batch_size=32, sample_shape=(3, 224, 224), dtype="float32")
B = 19_271_680  # 32x3x224x224x4 rounded to pages + one labels page (torch_shm.md section 4)


def test_the_seed_configuration() -> None:
    plan = make_plan(SEED)
    assert plan.storages == (19_267_584, 256)
    assert plan.batch_pages == B
    assert plan.prediction.steady == 173_527_040  # the bisected edge, 166 MiB
    assert plan.prediction.peak == 10 * B + 20 * PAGE_SIZE == 192_798_720
    # 183.87 MiB + 25% = 229.8 MiB, rounded up in 32 MiB steps.
    assert plan.shm is not None and plan.shm.bytes == 256 * MiB
    assert "predicted peak ~183.87 MiB + 25% headroom" in plan.shm.basis
    assert plan.memory_limit is None
    assert "--model-peak" in plan.memory_basis
    assert [(c.setting, c.value) for c in plan.changes] == [(Setting.SHM_SIZE, 256 * MiB)]


def test_batch_bytes_gives_the_same_batch_plus_a_labels_page() -> None:
    by_bytes = make_plan(PlanRequest(num_workers=4, batch_bytes=32 * 3 * 224 * 224 * 4))
    assert by_bytes.batch_pages == B
    assert by_bytes.prediction == make_plan(SEED).prediction


def test_memory_limit_is_model_peak_plus_shm_plus_margin() -> None:
    plan = make_plan(PlanRequest(**{**SEED.__dict__, "model_peak": 4 * GiB}))
    # 4 GiB + 256 MiB + max(1 GiB, 25% of 4 GiB) = 5.25 GiB -> whole GiB above 4 GiB.
    assert plan.memory_limit == 6 * GiB
    assert plan.memory_basis == (
        "model peak 4 GiB + shm 256 MiB + margin 1 GiB = 5.25 GiB, rounded up to 6 GiB"
    )
    assert [(c.setting, c.value) for c in plan.changes] == [
        (Setting.SHM_SIZE, 256 * MiB),
        (Setting.MEMORY_LIMIT, 6 * GiB),
    ]
    small_margin = make_plan(
        PlanRequest(**{**SEED.__dict__, "model_peak": GiB}), Policy(memory_margin=256 * MiB)
    )
    # 1 GiB + 256 MiB + max(256 MiB, 25% of 1 GiB) = 1.5 GiB.
    assert small_margin.memory_limit == 1536 * MiB


def test_pinned_copies_count_as_ordinary_memory() -> None:
    plan = make_plan(PlanRequest(**{**SEED.__dict__, "pin_memory": True, "model_peak": GiB}))
    assert plan.prediction.pinned_memory == 9 * B
    assert plan.prediction.peak == make_plan(SEED).prediction.peak
    # 1 GiB + 165.4 MiB pinned + 256 MiB + 1 GiB = 2.41 GiB -> 2.5 GiB.
    assert plan.memory_limit == 2560 * MiB
    assert "pinned copies" in plan.memory_basis
    assert any("pin_memory" in n for n in plan.prediction.notes)


def test_ranks_and_loaders_size_the_node() -> None:
    plan = make_plan(PlanRequest(**{**SEED.__dict__, "local_ranks": 8, "loaders": 2}))
    assert plan.prediction.peak == 16 * 192_798_720
    assert plan.shm is not None and plan.shm.bytes == 4 * GiB  # 2.87 GiB x 1.25 = 3.59 GiB


def test_dropping_each_batch_lowers_the_peak_to_the_steady_level() -> None:
    plan = make_plan(PlanRequest(**{**SEED.__dict__, "drops_batch": True}))
    assert plan.prediction.peak == 173_527_040
    assert plan.shm is not None and plan.shm.bytes == 224 * MiB  # 206.9 MiB, 32 MiB steps


def test_no_workers_needs_no_shm() -> None:
    plan = make_plan(PlanRequest(**{**SEED.__dict__, "num_workers": 0}))
    assert plan.shm is None and plan.changes == () and plan.memory_limit is None


def test_check_fit_both_ways() -> None:
    plan = make_plan(SEED)
    assert check_fit(plan, 192_798_720).fits
    short = check_fit(plan, 64 * MiB, total=64 * MiB)
    assert not short.fits and short.peak == 192_798_720 and short.total == 64 * MiB
    with pytest.raises(ValueError, match="negative"):
        check_fit(plan, -1)


def test_workers_that_fit() -> None:
    # nw=1: 4 B' + 11 pages = 73.6 MiB; nw=2: 6 B' + 14 pages = 110.3 MiB.
    assert workers_that_fit(SEED, 100 * MiB) == 1
    assert workers_that_fit(SEED, 4 * B + 11 * PAGE_SIZE - 1) == 0
    # Docker's 64 MiB holds no float32 worker; 2 with uint8 images (4x smaller batches).
    assert workers_that_fit(SEED, 64 * MiB) == 0
    uint8 = PlanRequest(num_workers=4, batch_size=32, sample_shape=(3, 224, 224), dtype="uint8")
    b8 = padded_bytes((32 * 3 * 224 * 224, 256))
    expect = max(n for n in range(1, 20) if (2 * n + 2) * b8 + (3 * n + 8) * PAGE_SIZE <= 64 * MiB)
    assert workers_that_fit(uint8, 64 * MiB) == expect == 5
    assert workers_that_fit(SEED, 10**15) == WORKERS_LIMIT


@pytest.mark.parametrize("text", ["3x224", "-1", "0", "3,,4", "", "3.5", "a,b", "３"])
def test_bad_shapes(text: str) -> None:
    with pytest.raises(ValueError, match="invalid shape"):
        parse_shape(text)


def test_shapes() -> None:
    assert parse_shape("3,224,224") == (3, 224, 224)
    assert parse_shape(" 3, 224 ") == (3, 224)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"batch_size": None, "sample_shape": None}, "give batch size and sample shape"),
        ({"batch_bytes": 10}, "not both"),
        ({"model_peak": 0}, "model peak must be > 0"),
        ({"num_workers": -1}, "num_workers must be >= 0"),
    ],
)
def test_bad_requests(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PlanRequest(**{**SEED.__dict__, **fields})  # type: ignore[arg-type]


def test_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        make_plan(PlanRequest(**{**SEED.__dict__, "dtype": "float33"}))

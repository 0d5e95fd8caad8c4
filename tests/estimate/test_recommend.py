"""Clean rounding and the shm / memory recommendation arithmetic."""

from __future__ import annotations

import pytest

from shmguard.estimate import clean_size, dataloader_bound, recommend
from shmguard.estimate.decide import Need
from shmguard.estimate.policy import clean_memory
from shmguard.fix.snippets import fix_snippets
from shmguard.model.fact import Fact
from shmguard.units import GiB, MiB


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, MiB),
        (1, MiB),
        (MiB, MiB),
        (MiB + 1, 2 * MiB),
        (3 * MiB + 1, 4 * MiB),
        (64 * MiB, 64 * MiB),
        (65 * MiB, 80 * MiB),
        (160 * MiB, 160 * MiB),
        (207 * MiB, 224 * MiB),
        (int(1.3 * GiB), int(1.5 * GiB)),
        (2 * GiB, 2 * GiB),
        (2 * GiB + 1, int(2.5 * GiB)),
    ],
)
def test_clean_size(n: int, expected: int) -> None:
    assert clean_size(n) == expected


def test_clean_size_is_never_below_the_input() -> None:
    for n in range(0, 5 * GiB, 7 * MiB + 12345):
        c = clean_size(n)
        assert c >= n
        assert c % MiB == 0


def test_clean_size_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        clean_size(-1)


def test_shm_headroom_and_snippets() -> None:
    rec = recommend(128 * MiB, "measured peak")
    # 128 MiB * 1.25 = 160 MiB, already clean: 80% full, where watch fires, so one step more.
    assert rec.shm_size == 192 * MiB
    assert "measured peak 128 MiB + 25% headroom = 160 MiB" in rec.shm_basis
    assert "one step more to 192 MiB" in rec.shm_basis
    assert rec.memory_limit.value is None
    docker = next(s for s in fix_snippets(rec) if s.runtime == "docker")
    assert docker.text == "docker run --shm-size=192m IMAGE ..."


def test_memory_limit_from_cgroup_peak_does_not_double_count_shm() -> None:
    # cgroup peak 600 MiB of which 200 MiB were shm: non-shm 400 MiB.
    rec = recommend(
        200 * MiB,
        "measured peak",
        cgroup_peak=Fact.known(600 * MiB),
        shm_peak=200 * MiB,
        non_shm_seen=380 * MiB,
    )
    assert rec.shm_size == 256 * MiB  # 250 MiB -> quarter-of-128 MiB steps -> 256 MiB
    # 400 MiB non-shm + 256 MiB shm + 1 GiB margin = 1680 MiB -> 1792 MiB (256 MiB steps)
    assert rec.memory_limit.value == 1792 * MiB
    k8s = next(s for s in fix_snippets(rec) if s.runtime == "kubernetes")
    assert "memory: 1792Mi" in k8s.text
    assert "sizeLimit: 256Mi" in k8s.text


def test_memory_margin_is_a_quarter_of_large_non_shm_use() -> None:
    rec = recommend(1 * GiB, "probed minimum", cgroup_peak=Fact.known(9 * GiB), shm_peak=1 * GiB)
    # shm 1.25 GiB is 80% full: 1.5 GiB; non-shm 8 GiB; margin 2 GiB -> 11.5 GiB -> 12 GiB
    assert rec.shm_size == int(1.5 * GiB)
    assert rec.memory_limit.value == 12 * GiB


def test_memory_limit_from_the_current_limit_is_raised_never_cut() -> None:
    # 8 GiB limit beside a 1 GiB /dev/shm: 7 GiB room + a 2.5 GiB /dev/shm = 9.5 GiB -> 10 GiB
    # (a 1800 MiB peak: 2 GiB would have been 80% full after headroom, and 3 GiB the answer)
    rec = recommend(1800 * MiB, "peak over 7d", current_limit=8 * GiB, current_shm=GiB)
    assert rec.shm_size == int(2.5 * GiB)
    assert rec.memory_limit.value == 10 * GiB
    assert rec.memory_basis.endswith("7 GiB + shm size 2.5 GiB = 9.5 GiB, rounded up to 10 GiB")
    # room to spare: the limit stays; a measured cgroup peak takes precedence
    kept = recommend(10 * MiB, "peak over 7d", current_limit=8 * GiB, current_shm=GiB)
    assert kept.memory_limit.value == 8 * GiB and kept.memory_basis.endswith(": kept")
    measured = recommend(
        10 * MiB, "measured peak", cgroup_peak=Fact.known(100 * MiB), current_limit=8 * GiB
    )
    # non-shm 100 MiB (no shm peak given) + a 14 MiB /dev/shm + the 1 GiB margin
    assert measured.shm_size == 14 * MiB
    assert measured.memory_limit.value == clean_memory(100 * MiB + 14 * MiB + GiB)


def test_unknown_cgroup_peak_keeps_its_reason() -> None:
    rec = recommend(10 * MiB, "measured peak", cgroup_peak=Fact.unknown("not writable"))
    assert rec.memory_limit.value is None
    assert rec.memory_limit.reason == "not writable"
    assert all("--memory" not in s.text for s in fix_snippets(rec))


def test_no_need_means_no_recommendation() -> None:
    rec = recommend(None, "the run ran out of /dev/shm")
    assert rec.shm_size is None
    assert fix_snippets(rec) == ()
    assert rec.shm_basis == "the run ran out of /dev/shm"


def test_negative_headroom_is_rejected() -> None:
    with pytest.raises(ValueError, match="headroom"):
        recommend(MiB, "x", headroom=-0.1)


def test_dataloader_bound_matches_the_measured_formula() -> None:
    # (nw x pf + 2) x B' + (3 nw + 8) pages, B' = batch pages + one labels page
    # (docs/background.md): 4 workers, uint8 32x3x224x224 = 4816896 bytes = 1176 pages.
    assert dataloader_bound(4, 4816896) == (10 * 1177 + 20) * 4096
    assert dataloader_bound(4, 4816896, prefetch_factor=4) == (18 * 1177 + 20) * 4096
    assert dataloader_bound(1, 1) == (4 * 2 + 11) * 4096
    assert dataloader_bound(0, 10 * MiB) == 0
    with pytest.raises(ValueError):
        dataloader_bound(2, MiB, prefetch_factor=0)


def test_the_dataloader_model_is_combined_with_the_peak_before_headroom() -> None:
    bound = dataloader_bound(4, 4816896)  # ~46 MiB
    model = Need(bound, "its predicted peak")
    rec = recommend(22 * MiB, "measured peak", model=model)
    # the model's peak gets the headroom too: ~46 MiB x 1.25 = ~57.5 MiB -> 64 MiB (the bound
    # as a floor after headroom gave 48 MiB: 96% full at the model's peak)
    assert rec.shm_size == 64 * MiB
    assert "the larger of measured peak 22 MiB and its predicted peak" in rec.shm_basis
    low = recommend(100 * MiB, "measured peak", model=Need(10 * MiB, "its predicted peak"))
    assert low.shm_size == 128 * MiB and "the larger of" in low.shm_basis


def test_a_configured_need_is_a_floor_after_headroom() -> None:
    rec = recommend(22 * MiB, "peak over 7d", need_floor=Need(100 * MiB, "the configured need"))
    assert rec.shm_size == 112 * MiB
    assert "raised to the configured need 100 MiB" in rec.shm_basis

"""One need gives one size everywhere: measure, probe, doctor and explain size through the one
sizing policy (shmguard.estimate.policy)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.estimate import (
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
from shmguard.units import GiB, MiB


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

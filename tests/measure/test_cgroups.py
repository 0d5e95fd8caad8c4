"""Cgroup planning on fixture trees (v2 host, v2 without delegation, v1, v1 in a container)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.measure.cgroups import CgroupDir, plan_cgroups

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "measure"


def test_v1_memory_under_the_current_group_and_cpu_quota() -> None:
    root = FIX / "cgroup_v1"
    plan = plan_cgroups(256 * 2**20, 1.5, root=root, token="t1")
    assert plan.unavailable == {}
    mem = plan.get("memory")
    assert mem == CgroupDir(
        "memory",
        1,
        str(root / "sys/fs/cgroup/memory/process_api/abc/shmguard-t1"),
        (("memory.limit_in_bytes", "268435456"),),
        peak="memory.max_usage_in_bytes",
        usage="memory.usage_in_bytes",
        events="memory.oom_control",
    )
    cpu = plan.get("cpu")
    assert cpu is not None
    assert cpu.dir == str(root / "sys/fs/cgroup/cpu/shmguard-t1")
    assert cpu.writes == (("cpu.cfs_period_us", "100000"), ("cpu.cfs_quota_us", "150000"))


def test_v1_accounting_only_writes_no_limit() -> None:
    plan = plan_cgroups(account_memory=True, root=FIX / "cgroup_v1", token="t")
    mem = plan.get("memory")
    assert mem is not None and mem.writes == ()
    assert plan.get("cpu") is None


def test_v1_container_mount_root_is_stripped() -> None:
    root = FIX / "cgroup_v1_container"
    plan = plan_cgroups(2**30, root=root, token="c")
    mem = plan.get("memory")
    assert mem is not None
    assert mem.dir == str(root / "sys/fs/cgroup/memory/shmguard-c")


def test_v2_host_uses_memory_max_and_cpu_max() -> None:
    root = FIX / "cgroup_v2_host"
    plan = plan_cgroups(2**30, 0.5, root=root, token="v2")
    mem, cpu = plan.get("memory"), plan.get("cpu")
    assert mem == CgroupDir(
        "memory",
        2,
        str(root / "sys/fs/cgroup/shmguard-v2"),
        (("memory.max", "1073741824"),),
        peak="memory.peak",
        usage="memory.current",
        events="memory.events",
    )
    assert cpu is not None and cpu.writes == (("cpu.max", "50000 100000"),)


def test_v2_without_delegated_controllers_says_why() -> None:
    plan = plan_cgroups(2**30, 2, root=FIX / "cgroup_v2_plain", token="x")
    assert plan.dirs == ()
    assert "memory controller is not enabled for children" in plan.unavailable["memory"]
    assert "cgroup.subtree_control" in plan.unavailable["memory"]
    assert "no cgroup v1 memory hierarchy" in plan.unavailable["memory"]
    assert "cpu controller is not enabled" in plan.unavailable["cpu"]


def test_nothing_asked_nothing_planned() -> None:
    plan = plan_cgroups(root=FIX / "cgroup_v1")
    assert plan.dirs == () and plan.unavailable == {}


def test_missing_proc_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    plan = plan_cgroups(64 * 2**20, root=tmp_path)
    assert "memory" in plan.unavailable


@pytest.mark.parametrize(("mem", "cpus"), [(0, None), (-5, None), (None, 0.0), (None, -1.0)])
def test_bad_limits_are_rejected(mem: int | None, cpus: float | None) -> None:
    with pytest.raises(ValueError):
        plan_cgroups(mem, cpus, root=FIX / "cgroup_v1")

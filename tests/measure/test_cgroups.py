"""Cgroup planning on fixture trees (v2 host, v2 without delegation, v1, v1 in a container, nested
mount roots, escaped spaces in mountinfo)."""

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
    assert plan.unavailable["memory"] == (
        "/proc/self/mountinfo: No such file or directory; "
        "/proc/self/cgroup: No such file or directory"
    )


@pytest.mark.parametrize(("mem", "cpus"), [(0, None), (-5, None), (None, 0.0), (None, -1.0)])
def test_bad_limits_are_rejected(mem: int | None, cpus: float | None) -> None:
    with pytest.raises(ValueError):
        plan_cgroups(mem, cpus, root=FIX / "cgroup_v1")


# Trees shared with tests/inspect/test_inspect_cgroupfs.py: one discovery, two consumers.
CGFS = Path(__file__).resolve().parents[1] / "fixtures" / "cgroupfs"


def test_nested_root_of_a_sibling_pod_is_not_stripped() -> None:
    # Mount root /kubepods/pod1 is a string prefix of /kubepods/pod12/ctr but not its parent:
    # stripping it gave sys/fs/cgroup/memory/2/ctr. The cgroup is outside the mount: no plan.
    root = CGFS / "v1-nested-root-sibling"
    plan = plan_cgroups(2**30, 1.0, root=root, token="n")
    assert plan.dirs == ()
    for controller, point in (("memory", "memory"), ("cpu", "cpu,cpuacct")):
        assert plan.unavailable[controller] == (
            "no cgroup v2 hierarchy: no cgroup2 mount; cgroup path /kubepods/pod12/ctr is "
            f"outside mount root /kubepods/pod1 (/sys/fs/cgroup/{point})"
        )


def test_nested_root_of_the_own_pod_is_stripped() -> None:
    root = CGFS / "v1-nested-root-own"
    plan = plan_cgroups(2**30, 1.0, root=root, token="n")
    assert plan.unavailable == {}
    mem, cpu = plan.get("memory"), plan.get("cpu")
    assert mem is not None and mem.dir == str(root / "sys/fs/cgroup/memory/ctr/shmguard-n")
    assert cpu is not None and cpu.dir == str(root / "sys/fs/cgroup/cpu,cpuacct/ctr/shmguard-n")


def test_escaped_space_in_the_mount_root_is_unescaped_before_stripping() -> None:
    root = CGFS / "v1-escaped-root"
    plan = plan_cgroups(2**30, 0.5, root=root, token="s")
    assert plan.unavailable == {}
    mem, cpu = plan.get("memory"), plan.get("cpu")
    assert mem is not None and mem.dir == str(root / "sys/fs/cgroup/memory/step 0/shmguard-s")
    assert cpu is not None
    assert cpu.dir == str(root / "sys/fs/cgroup/cpu,cpuacct/step 0/shmguard-s")


def test_escaped_space_in_the_mount_point_is_unescaped() -> None:
    root = CGFS / "v2-escaped-mount-point"
    plan = plan_cgroups(2**30, 0.5, root=root, token="s")
    assert plan.unavailable == {}
    mem = plan.get("memory")
    assert mem is not None and (mem.version, mem.dir) == (2, str(root / "run/cgroup v2/shmguard-s"))
    cpu = plan.get("cpu")
    assert cpu is not None and cpu.dir == str(root / "run/cgroup v2/shmguard-s")


def test_unparsable_mountinfo_is_a_reason(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text("not a mount line\n")
    (tmp_path / "proc/self/cgroup").write_text("0::/\n")
    plan = plan_cgroups(64 * 2**20, root=tmp_path)
    assert plan.unavailable["memory"] == (
        "no cgroup v2 hierarchy: mountinfo: line 1: not in proc(5) mountinfo format; "
        "no cgroup v1 memory hierarchy: mountinfo: line 1: not in proc(5) mountinfo format"
    )

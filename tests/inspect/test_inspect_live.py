"""Facts about this machine, cross-checked against independent sources (resource, sysconf)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from shmguard.inspect.host import inspect_host

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def live():
    return inspect_host(gpus=False)


def test_limits_match_getrlimit(live):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    assert live.limits.nofile_soft.value == (None if soft == inf else soft)
    assert live.limits.nofile_hard.value == (None if hard == inf else hard)
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert live.limits.memlock_soft.value == (None if soft == inf else soft)


def test_meminfo_total_matches_sysconf(live):
    assert live.memory.total.value == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_shm_matches_statvfs(live):
    st = os.statvfs("/dev/shm")
    assert live.shm.total.value == st.f_blocks * st.f_frsize
    assert live.shm.device.value == os.stat("/dev/shm").st_dev


def test_cgroup_is_honest_about_this_hybrid_v1_host(live):
    text = Path("/proc/self/cgroup").read_text()
    if not any(
        line.split(":")[1] == "memory" for line in text.splitlines() if line.count(":") >= 2
    ):
        pytest.skip("the memory controller is not on cgroup v1 here")
    cg = live.cgroup
    assert cg.version.value == 1
    memory_dir = Path(cg.memory_dir.value or "")
    raw = int((memory_dir / "memory.limit_in_bytes").read_text())
    if raw < 2**62:
        assert cg.memory_limit.value is not None and cg.memory_limit.value <= raw
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    if unified.exists() and "memory" not in unified.read_text().split():
        assert cg.mode == "hybrid"
        assert any("has no memory controller" in n for n in cg.notes)


def test_cpuset_matches_affinity(live):
    assert live.cgroup.cpuset.value == len(os.sched_getaffinity(0))

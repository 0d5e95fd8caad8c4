"""The one cgroup discovery: /proc/<pid>/cgroup placed on cgroupfs mounts (tests/fixtures/cgroupfs).

Each tree is also planned by the sandbox in tests/measure/test_cgroups.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.inspect.cgroup import read_cgroup
from shmguard.inspect.cgroupfs import Membership, locate_cgroup, parse_proc_cgroup
from shmguard.units import GiB

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cgroupfs"


def texts(root: Path) -> tuple[str, str]:
    return (root / "proc/self/mountinfo").read_text(), (root / "proc/self/cgroup").read_text()


def test_nested_root_is_stripped_on_a_component_boundary_only() -> None:
    # Mount root /kubepods/pod1 is a string prefix of /kubepods/pod12/ctr, not a path prefix.
    root = FIX / "v1-nested-root-sibling"
    found = locate_cgroup(root, *texts(root), "memory").value
    assert found is not None
    assert (found.dir, found.path) == ("/sys/fs/cgroup/memory", root / "sys/fs/cgroup/memory")
    assert found.note == "cgroup path /kubepods/pod12/ctr is outside mount root /kubepods/pod1"
    cg = read_cgroup(root, *texts(root))
    assert cg.memory_dir.value == "/sys/fs/cgroup/memory"
    # memory and cpu,cpuacct are both outside: one note, not the same line twice.
    assert cg.notes == ("cgroup path /kubepods/pod12/ctr is outside mount root /kubepods/pod1",)


def test_nested_root_of_the_own_pod_is_stripped() -> None:
    root = FIX / "v1-nested-root-own"
    found = locate_cgroup(root, *texts(root), "memory").value
    assert found is not None
    assert (found.version, found.controller, found.cgroup) == (1, "memory", "/kubepods/pod12/ctr")
    assert (found.dir, found.note) == ("/sys/fs/cgroup/memory/ctr", None)
    assert found.mount.root == "/kubepods/pod12"
    cg = read_cgroup(root, *texts(root))
    assert (cg.version.value, cg.mode, cg.memory_dir.value) == (
        1,
        "v1",
        "/sys/fs/cgroup/memory/ctr",
    )
    assert (cg.memory_limit.value, cg.memory_current.value) == (2 * GiB, 209715200)
    assert cg.cpu_quota.value == 2.5
    assert cg.notes == ()


def test_escaped_space_in_the_mount_root() -> None:
    root = FIX / "v1-escaped-root"
    found = locate_cgroup(root, *texts(root), "cpu").value
    assert found is not None
    assert found.mount.root == "/batch jobs/job 7"
    assert found.dir == "/sys/fs/cgroup/cpu,cpuacct/step 0"
    assert found.path.is_dir()
    cg = read_cgroup(root, *texts(root))
    assert cg.memory_dir.value == "/sys/fs/cgroup/memory/step 0"
    assert (cg.memory_limit.value, cg.memory_current.value) == (4 * GiB, 314572800)
    assert cg.cpu_quota.value is None and cg.cpu_quota.ok  # -1: no quota
    assert cg.notes == ()


def test_escaped_space_in_the_mount_point() -> None:
    root = FIX / "v2-escaped-mount-point"
    found = locate_cgroup(root, *texts(root)).value
    assert found is not None
    assert (found.version, found.controller, found.dir) == (2, "", "/run/cgroup v2")
    assert found.path == root / "run/cgroup v2"
    cg = read_cgroup(root, *texts(root))
    assert (cg.version.value, cg.mode, cg.memory_dir.value) == (2, "v2", "/run/cgroup v2")
    # The root cgroup has no memory.max: nothing limits it (cgroup-v2.rst).
    assert cg.memory_limit.value is None and cg.memory_limit.ok
    assert cg.cpuset.value == 8


MOUNT_V1 = "31 30 0:29 {root} /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
MOUNT_V2 = "30 25 0:26 {root} /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.mark.parametrize(
    ("mount_root", "path", "expected"),
    [
        ("/", "/", "/sys/fs/cgroup/memory"),
        ("/", "/a/b", "/sys/fs/cgroup/memory/a/b"),
        ("/kubepods/pod1", "/kubepods/pod1", "/sys/fs/cgroup/memory"),
        ("/kubepods/pod1", "/kubepods/pod1/x", "/sys/fs/cgroup/memory/x"),
        ("/kubepods/pod1", "/kubepods/pod12/x", None),
        ("/kubepods/pod1", "/kubepods", None),
        # Above the reader's cgroup namespace root: never "/sys/fs/cgroup/memory/../x".
        ("/", "/../x", None),
        ("/..", "/../x", "/sys/fs/cgroup/memory/x"),
    ],
)
def test_mount_root_holds_the_path_by_components(
    mount_root: str, path: str, expected: str | None
) -> None:
    found = locate_cgroup(
        Path("/r"), MOUNT_V1.format(root=mount_root), f"4:memory:{path}\n", "memory"
    )
    assert found.value is not None
    if expected is None:
        assert found.value.dir == "/sys/fs/cgroup/memory"
        assert found.value.note == f"cgroup path {path} is outside mount root {mount_root}"
    else:
        assert (found.value.dir, found.value.note) == (expected, None)
        assert found.value.path == Path("/r") / expected.lstrip("/")


def test_the_mount_whose_root_holds_the_cgroup_is_chosen() -> None:
    mountinfo = MOUNT_V1.format(root="/kubepods/pod12") + MOUNT_V1.format(
        root="/kubepods/pod1"
    ).replace("/sys/fs/cgroup/memory", "/mnt/other")
    found = locate_cgroup(Path("/"), mountinfo, "4:memory:/kubepods/pod12/c\n", "memory").value
    assert found is not None and (found.dir, found.note) == ("/sys/fs/cgroup/memory/c", None)


@pytest.mark.parametrize(
    ("mountinfo", "proc_cgroup", "controller", "reason"),
    [
        (MOUNT_V1.format(root="/"), "0::/\n", None, "no cgroup v2 hierarchy: no cgroup2 mount"),
        (
            MOUNT_V2.format(root="/"),
            "4:memory:/\n",
            None,
            "no cgroup v2 hierarchy: no '0::' line in /proc/<pid>/cgroup",
        ),
        (
            MOUNT_V2.format(root="/"),
            "0::/\n",
            "memory",
            "no cgroup v1 memory hierarchy: no cgroup mount with the memory controller",
        ),
        (
            MOUNT_V1.format(root="/"),
            "5:cpu,cpuacct:/\n",
            "memory",
            "no cgroup v1 memory hierarchy: no memory line in /proc/<pid>/cgroup",
        ),
        (
            MOUNT_V1.format(root="/").rstrip("\n"),
            "4:memory:/\n",
            "memory",
            "no cgroup v1 memory hierarchy: mountinfo: line 1: truncated (no end of line)",
        ),
    ],
)
def test_unknown_with_a_reason(
    mountinfo: str, proc_cgroup: str, controller: str | None, reason: str
) -> None:
    assert locate_cgroup(Path("/"), mountinfo, proc_cgroup, controller).reason == reason


def test_proc_cgroup_lines() -> None:
    # A path may hold colons; only the first two split. A line without two colons is skipped.
    assert parse_proc_cgroup("5:cpu,cpuacct:/a:b\n0::/\ngarbage\n") == (
        Membership("5", ("cpu", "cpuacct"), "/a:b"),
        Membership("0", (), "/"),
    )

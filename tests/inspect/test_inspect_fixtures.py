"""Host facts from fixture trees (cgroup v1/v2, Kubernetes, Podman, Slurm) via the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.model import Fact
from shmguard.units import GiB, MiB


def facts(root: Path, **kwargs):
    return inspect_host(root, statvfs=statvfs_from_json(root), **kwargs)


def test_docker_cgroup_v2_default(fixture_root):
    f = facts(fixture_root("docker-v2-default"))
    shm = f.shm
    assert (shm.exists.value, shm.mount_point.value, shm.fstype.value, shm.source.value) == (
        True,
        "/dev/shm",
        "tmpfs",
        "shm",
    )
    assert shm.size_option.value == 64 * MiB
    assert shm.sizing.value == "size-option"
    assert (shm.total.value, shm.used.value, shm.free.value) == (67108864, 0, 67108864)
    assert shm.default_of.value == ("docker", "containerd", "cri-o")
    assert (shm.named_files.value, shm.leftovers.value) == (0, ())
    cg = f.cgroup
    assert (cg.version.value, cg.mode, cg.memory_dir.value) == (2, "v2", "/sys/fs/cgroup")
    assert cg.memory_limit.value == 8 * GiB
    assert cg.memory_current.value == 1234567168
    assert (cg.swap_limit.value, cg.oom_kills.value, cg.shmem.value) == (8 * GiB, 0, 0)
    assert (cg.cpu_quota.value, cg.cpuset.value) == (2.0, 16)
    assert cg.notes == ()
    assert (f.runtime.name, f.runtime.evidence) == ("docker", ("/.dockerenv exists",))
    assert (f.limits.nofile_soft.value, f.limits.nofile_hard.value) == (1048576, 1048576)
    assert f.limits.memlock_soft.value == 8388608
    assert f.memory.total.value == 65838052 * 1024
    assert f.memory.swap_total.value == 0
    assert f.sysv.value is not None and f.sysv.value.segments == 0
    assert f.gpus.value is None and "nvidiactl missing" in (f.gpus.reason or "")
    assert f.torch.reason == "not requested (use --torch)"


def test_kubernetes_unsized_emptydir_is_sized_to_the_pod_limit(fixture_root):
    f = facts(fixture_root("k8s-v2-unsized-emptydir"))
    assert f.runtime.name == "kubernetes"
    assert f.runtime.evidence == (
        "env KUBERNETES_SERVICE_HOST",
        "/var/run/secrets/kubernetes.io/serviceaccount exists",
    )
    assert f.shm.size_option.value == 16 * GiB == f.shm.total.value
    assert f.shm.options.value == ("rw", "size=16777216k", "inode64", "noswap")
    assert f.shm.default_of.value == ()
    assert f.cgroup.memory_limit.value == 16 * GiB
    assert f.cgroup.oom_kills.value == 2
    assert f.cgroup.shmem.value == 3 * GiB
    assert f.cgroup.swap_limit.value == 0
    assert (f.cgroup.cpu_quota.value, f.cgroup.cpuset.value) == (8.0, 64)


def test_podman_default_is_65536000_bytes_and_no_memory_limit(fixture_root):
    f = facts(fixture_root("podman-v2-default"))
    assert f.runtime.name == "podman"
    assert f.runtime.evidence == ("/run/.containerenv exists", "env container=podman")
    assert f.shm.size_option.value == 65536000 == f.shm.total.value
    assert f.shm.used.value == 12 * 4096
    assert f.shm.default_of.value == ("podman",)
    # "max" is a known absence of a limit, not an unknown.
    assert f.cgroup.memory_limit.value is None and f.cgroup.memory_limit.ok
    assert f.cgroup.cpu_quota.value is None and f.cgroup.cpu_quota.ok
    assert f.limits.nofile_soft.value == 524288


def test_cgroup_v1_docker_with_host_ipc(fixture_root):
    f = facts(fixture_root("docker-v1-ipc-host"))
    cg = f.cgroup
    # The container sees its own cgroup as the mount root: /docker/<id> maps to the mount.
    assert (cg.version.value, cg.mode, cg.memory_dir.value) == (1, "v1", "/sys/fs/cgroup/memory")
    assert cg.memory_limit.value == 4 * GiB
    assert cg.memory_current.value == 3 * GiB
    assert cg.swap_limit.value == 4 * GiB  # memsw 8 GiB minus memory 4 GiB
    assert cg.shmem.value == 2 * GiB
    assert cg.oom_kills.value == 0
    assert cg.cpu_quota.value is None and cg.cpu_quota.ok
    assert cg.cpuset.value == 8
    assert f.shm.sizing.value == "kernel-default"
    assert f.shm.size_option.value is None and f.shm.size_option.ok
    assert f.shm.total.value == 33709080576
    assert (f.limits.nofile_soft.value, f.limits.memlock_soft.value) == (1024, 65536)
    assert f.sysv.value is not None
    assert (f.sysv.value.segments, f.sysv.value.bytes, f.sysv.value.unattached) == (1, MiB, 1)


def test_slurm_disk_shm_and_limit_two_levels_up(fixture_root):
    f = facts(fixture_root("slurm-disk-shm"))
    assert (f.runtime.name, f.runtime.evidence) == ("slurm", ("env SLURM_JOB_ID",))
    assert (f.shm.fstype.value, f.shm.sizing.value, f.shm.source.value) == (
        "ext4",
        "not-tmpfs",
        "/dev/nvme0n1p2",
    )
    assert f.cgroup.memory_dir.value == (
        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0"
    )
    # task_0 and step_0 say "max"; job_4242 limits to 64 GiB (top-down constraint).
    assert f.cgroup.memory_limit.value == 64 * GiB
    assert f.limits.memlock_soft.value is None and f.limits.memlock_soft.ok


def test_missing_dev_shm_is_unknown_with_reason(fixture_root):
    f = facts(fixture_root("docker-ipc-none"))
    assert f.shm.exists == Fact.known(False)
    for fact in (f.shm.total, f.shm.fstype, f.shm.sizing, f.shm.leftovers, f.shm.device):
        assert fact.value is None and fact.reason == "/dev/shm: no such directory"
    assert f.holders.value is None and f.holders.reason == "/dev/shm: no such directory"


def test_unreadable_files_become_unknown_facts(tmp_path: Path):
    # An empty root: nothing to read, nothing raised.
    (tmp_path / "dev" / "shm").mkdir(parents=True)
    f = inspect_host(tmp_path, statvfs=statvfs_from_json_missing(tmp_path))
    assert f.shm.fstype.reason == "/proc/self/mountinfo: no such file or directory"
    assert f.shm.total.reason == "statvfs(/dev/shm): no such file or directory"
    assert f.memory.total.reason == "/proc/meminfo: no such file or directory"
    assert f.limits.nofile_soft.reason == "/proc/self/limits: no such file or directory"
    assert f.cgroup.memory_limit.reason == "mountinfo unreadable"
    assert f.sysv.reason == "/proc/sysvipc/shm: no such file or directory"
    # Neither the environment nor the cgroup file could be read: "none" would be a guess.
    assert (f.runtime.name, f.runtime.evidence) == (
        "unknown",
        (
            "could not read /proc/self/cgroup: no such file or directory",
            "could not read /proc/self/environ: no such file or directory",
        ),
    )


def statvfs_from_json_missing(root: Path):
    (root / "statvfs.json").write_text("{}")
    return statvfs_from_json(root)


def test_malformed_statvfs_record_names_the_file(tmp_path: Path):
    (tmp_path / "statvfs.json").write_text('{"/dev/shm": {"f_frsize": 4096}}')
    with pytest.raises(ValueError, match=r"statvfs.json: not a statvfs record"):
        statvfs_from_json(tmp_path)


def test_malformed_cgroup_values_are_unknown_not_raised(fixture_root):
    root = fixture_root("docker-v2-default")
    (root / "sys/fs/cgroup/memory.max").write_text("lots\n")
    (root / "sys/fs/cgroup/cpu.max").write_text("fast\n")
    (root / "sys/fs/cgroup/cpuset.cpus.effective").write_text("a-b\n")
    f = facts(root)
    assert f.cgroup.memory_limit.value is None
    assert "/sys/fs/cgroup/memory.max: not an integer: 'lots'" in (
        f.cgroup.memory_limit.reason or ""
    )
    assert f.cgroup.cpu_quota.reason == "/sys/fs/cgroup/cpu.max: not '$MAX $PERIOD': 'fast'"
    assert f.cgroup.cpuset.reason == "/sys/fs/cgroup/cpuset.cpus.effective: not a cpu list: 'a-b'"


def test_environ_is_injectable(fixture_root):
    root = fixture_root("docker-v2-default")
    f = facts(root, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert f.runtime.name == "kubernetes"
    assert f.runtime.evidence == ("env KUBERNETES_SERVICE_HOST", "/.dockerenv exists")

"""ENV009 `shm-not-tmpfs` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.lint.doctor import diagnose


def test_env009_on_a_disk_dev_shm(host):
    (disk,) = diagnose(host("slurm-disk-shm")).findings
    assert disk.message == "/dev/shm is on ext4 (/dev/nvme0n1p2 mounted there)"
    assert disk.fix is not None and "Slurm has no /dev/shm setting" in disk.fix.description
    # A disk directory is not shmem: no memory-limit findings despite its 1.8 TiB.
    assert [f.code for f in diagnose(host("slurm-disk-shm")).findings] == ["ENV009"]

"""/dev/shm facts on real mounts in private mount namespaces (root + unshare)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.units import MiB

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="needs root and unshare(1) for a private mount namespace",
    ),
]

READ = textwrap.dedent(
    """
    import json, sys
    from shmguard.inspect.host import inspect_host
    from shmguard.render.json import to_data
    facts = inspect_host(holders=False, gpus=False)
    print(json.dumps(to_data(facts.shm)))
    """
)


def in_namespace(setup: str, code: str = READ) -> dict:
    """Run ``setup`` (shell) then ``code`` (python) in a private mount namespace."""
    script = f'{setup} && exec "{sys.executable}" -c "$CODE"'
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=50,
        env=dict(os.environ, CODE=code),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_64m_tmpfs_reports_exact_total_and_the_docker_default():
    shm = in_namespace("mount -t tmpfs -o size=64m tmpfs /dev/shm")
    assert shm["total"] == 67108864
    assert (shm["used"], shm["free"]) == (0, 67108864)
    assert shm["size_option"] == 67108864
    assert (shm["fstype"], shm["sizing"], shm["mount_point"]) == (
        "tmpfs",
        "size-option",
        "/dev/shm",
    )
    assert shm["default_of"] == ["docker", "containerd", "cri-o"]
    assert "size=65536k" in shm["options"]


def test_podman_default_size():
    shm = in_namespace("mount -t tmpfs -o size=64000k tmpfs /dev/shm")
    assert shm["total"] == 65536000
    assert shm["default_of"] == ["podman"]


def test_1g_tmpfs_is_no_default():
    shm = in_namespace("mount -t tmpfs -o size=1g tmpfs /dev/shm")
    assert (shm["total"], shm["default_of"]) == (1 << 30, [])


def test_unsized_tmpfs_is_half_of_ram():
    shm = in_namespace("mount -t tmpfs tmpfs /dev/shm")
    mem_total = inspect_host(holders=False, gpus=False).memory.total.value
    assert mem_total is not None
    assert shm["sizing"] == "kernel-default"
    assert shm["size_option"] is None
    assert shm["total"] == (mem_total // 4096 // 2) * 4096


def test_size_zero_is_unlimited():
    shm = in_namespace("mount -t tmpfs -o size=0 tmpfs /dev/shm")
    assert (shm["sizing"], shm["size_option"]) == ("unlimited", 0)


def test_zero_block_filesystems_have_no_size_not_a_size_of_zero():
    # statvfs answers 0/0/0 for a size=0 tmpfs and for ramfs even with 10 MiB written: that is
    # "no block count", and used to be reported as total 0, used 0, free 0.
    fill = " && head -c 10485760 /dev/zero > /dev/shm/data"
    shm = in_namespace("mount -t tmpfs -o size=0 tmpfs /dev/shm" + fill)
    why = (
        "statvfs(/dev/shm) reports 0 blocks: a tmpfs with size=0 has no size limit and keeps "
        "no block count"
    )
    for key in ("total", "used", "free"):
        assert shm[key] == {"value": None, "reason": why}
    assert (shm["named_files"], shm["named_bytes"]) == (1, 10 * MiB)
    shm = in_namespace("mount -t ramfs ramfs /dev/shm" + fill)
    why = "statvfs(/dev/shm) reports 0 blocks: ramfs keeps no block count (no size limit)"
    for key in ("total", "used", "free"):
        assert shm[key] == {"value": None, "reason": why}


def test_missing_dev_shm_in_a_real_namespace():
    # A fresh /dev without shm/ (never rmdir /dev/shm, even in a namespace: the directory is
    # on the shared /dev, and removing a mount point detaches it in every namespace).
    shm = in_namespace("mount -t tmpfs -o size=1m tmpfs /dev")
    assert shm["exists"] is False
    assert shm["total"] == {"value": None, "reason": "/dev/shm: no such directory"}


def test_ramfs_and_bind_mounted_directory_are_not_tmpfs(tmp_path):
    shm = in_namespace("mount -t ramfs ramfs /dev/shm")
    assert (shm["fstype"], shm["sizing"]) == ("ramfs", "not-tmpfs")
    disk = tmp_path / "shmdir"
    disk.mkdir()
    shm = in_namespace(f"mount --bind {disk} /dev/shm")
    assert shm["sizing"] == "not-tmpfs"
    assert shm["fstype"] != "tmpfs"
    assert shm["mount_point"] == "/dev/shm"


def test_leftover_zero_block_torch_files_and_named_bytes():
    setup = (
        "mount -t tmpfs -o size=64m tmpfs /dev/shm && "
        "truncate -s 18874368 /dev/shm/torch_4242_1234567_0 && "  # failed 18 MiB request
        "truncate -s 1048576 /dev/shm/torch_4242_1234567_1 && "
        "head -c 8192 /dev/zero > /dev/shm/torch_4242_7654321_2 && "  # a live named file
        "truncate -s 4096 /dev/shm/other_sparse"
    )
    shm = in_namespace(setup)
    assert shm["leftovers"] == [
        {"name": "torch_4242_1234567_0", "requested": 18874368},
        {"name": "torch_4242_1234567_1", "requested": 1048576},
    ]
    assert (shm["named_files"], shm["named_bytes"], shm["used"]) == (4, 8192, 8192)


HOLD = textwrap.dedent(
    """
    import json, os, sys
    fd = os.open("/dev/shm/torch_1_2_0", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.posix_fallocate(fd, 0, 10 << 20)
    os.unlink("/dev/shm/torch_1_2_0")
    print(json.dumps({"pid": os.getpid()}), flush=True)
    sys.stdin.read()
    """
)


def test_pid_reads_another_namespace_shm_and_its_holders(holder):
    h = holder(HOLD, size="64m")
    facts = inspect_host(pid=h.info["pid"], gpus=False)
    shm = facts.shm
    assert (shm.total.value, shm.used.value, shm.named_bytes.value) == (64 * MiB, 10 * MiB, 0)
    assert shm.size_option.value == 64 * MiB
    assert shm.default_of.value == ("docker", "containerd", "cri-o")
    held = facts.holders.value
    assert held is not None
    assert [p.pid for p in held.processes] == [h.info["pid"]]
    assert dict(held.by_kind)["torch"] == 10 * MiB == held.total_bytes
    # Our own /dev/shm is another filesystem, so it does not leak into the pid's view.
    assert shm.device.value != os.stat("/dev/shm").st_dev


def test_mounts_hidden_under_a_new_dev_are_not_read(tmp_path):
    # A fresh tmpfs on /dev hides the host's /dev/shm mounts, which stay in mountinfo. The
    # longest matching mount point used to win, so a 64 MiB tmpfs reached through a
    # /dev/shm -> elsewhere symlink was described by the hidden mount's size= option.
    target = tmp_path / "runshm"
    target.mkdir()
    setup = (
        "mount -t tmpfs -o size=1m tmpfs /dev && "
        f"mount -t tmpfs -o size=64m tmpfs {target} && ln -s {target} /dev/shm && "
        f"head -c 8192 /etc/passwd > {target}/f; true"
    )
    shm = in_namespace(setup)
    assert (shm["path"], shm["real_path"], shm["mount_point"]) == (
        "/dev/shm",
        str(target),
        str(target),
    )
    assert (shm["options"], shm["size_option"], shm["total"]) == (
        ["rw", "size=65536k"],
        64 * MiB,
        64 * MiB,
    )
    assert shm["default_of"] == ["docker", "containerd", "cri-o"]


HOLD_VIA_LINK = textwrap.dedent(
    """
    import json, os, sys
    fd = os.open("/dev/shm/torch_9_9_0", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.posix_fallocate(fd, 0, 3 << 20)
    os.unlink("/dev/shm/torch_9_9_0")
    from shmguard.inspect.host import inspect_host
    from shmguard.render.json import to_data
    facts = inspect_host(gpus=False)
    print(json.dumps(to_data(facts.holders)))
    """
)


def test_holders_found_through_a_symlinked_dev_shm(tmp_path):
    # The kernel names held files by their resolved path (/run/shm/...), so a scan for
    # "/dev/shm/" found nothing.
    target = tmp_path / "runshm"
    target.mkdir()
    setup = (
        "mount -t tmpfs -o size=1m tmpfs /dev && "
        f"mount -t tmpfs -o size=64m tmpfs {target} && ln -s {target} /dev/shm"
    )
    held = in_namespace(setup, HOLD_VIA_LINK)
    assert held["total_bytes"] == 3 * MiB
    assert held["by_kind"]["torch"] == 3 * MiB
    (proc,) = held["processes"]
    assert [(f["path"], f["deleted"]) for f in proc["files"]] == [(f"{target}/torch_9_9_0", True)]

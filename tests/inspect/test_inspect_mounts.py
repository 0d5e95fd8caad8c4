"""mountinfo parsing (proc(5) format) and the mount holding a path."""

from __future__ import annotations

import pytest

from shmguard.inspect.mounts import MountinfoError, mount_for, parse_mountinfo

TEXT = (
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
    "23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs devtmpfs rw,size=1000k,mode=755\n"
    "25 23 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n"
    "26 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=65536k\n"
    "27 22 0:40 /a\\040dir /mnt/my\\040disk rw master:3 propagate_from:2 - ext4 /dev/sdb1 rw\n"
)


def test_parse_fields_and_optional_fields():
    mounts = parse_mountinfo(TEXT)
    assert len(mounts) == 5
    m = mounts[4]
    assert (m.mount_id, m.parent_id, m.device) == (27, 22, "0:40")
    assert (m.root, m.mount_point, m.fstype, m.source) == (
        "/a dir",
        "/mnt/my disk",
        "ext4",
        "/dev/sdb1",
    )
    assert m.options == ("rw",)
    assert mounts[2].option("size") == "24684092k"
    assert mounts[0].option("size") is None


def test_stacked_mounts_take_the_topmost():
    m = mount_for(parse_mountinfo(TEXT), "/dev/shm")
    assert m is not None and m.mount_id == 26 and m.option("size") == "65536k"


def test_plain_directory_belongs_to_its_parent_mount():
    mounts = parse_mountinfo(TEXT)
    assert mount_for(mounts, "/dev/mqueue").mount_id == 23  # type: ignore[union-attr]
    assert mount_for(mounts, "/devices").mount_id == 22  # type: ignore[union-attr]
    assert mount_for((), "/dev/shm") is None


def test_malformed_line_names_its_number():
    with pytest.raises(MountinfoError, match="line 2: not in proc"):
        parse_mountinfo("22 1 259:2 / / rw - ext4 /dev/root rw\ngarbage here\n")

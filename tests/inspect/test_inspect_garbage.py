"""Garbage in host files (truncated, non-numeric, negative, Unicode digits, binary, empty) is an
unknown fact with a reason naming the file, never a traceback and never a made-up value."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from shmguard.inspect._read import parse_int, resolve
from shmguard.inspect.cgroup import parse_cpuset
from shmguard.inspect.host import inspect_host
from shmguard.inspect.mounts import MountinfoError, mount_for, parse_mountinfo
from shmguard.inspect.runtime import detect_runtime
from shmguard.inspect.shm import statvfs_from_json
from shmguard.inspect.system import read_limits, read_meminfo, read_sysv
from shmguard.model import Fact

CG = "sys/fs/cgroup"


def facts(root: Path, **kwargs):
    return inspect_host(root, statvfs=statvfs_from_json(root), gpus=False, **kwargs)


@pytest.mark.parametrize(
    ("text", "signed", "expected"),
    [
        ("42\n", False, (42, None)),
        ("-1\n", True, (-1, None)),
        ("-5\n", False, (None, "f: negative: '-5'")),
        ("1_000", False, (None, "f: not an integer: '1_000'")),
        ("+5", False, (None, "f: not an integer: '+5'")),
        ("\u0663", False, (None, "f: not an integer: '\u0663'")),  # ARABIC-INDIC DIGIT THREE
        ("10\u00b24", False, (None, "f: not an integer: '10\u00b24'")),  # superscript two
        ("", False, (None, "f: not an integer: ''")),
        ("8589934592 extra", False, (None, "f: not an integer: '8589934592 extra'")),
    ],
)
def test_parse_int_takes_only_what_the_kernel_writes(text, signed, expected):
    assert parse_int(text, "f", signed=signed) == expected


@pytest.mark.parametrize(
    ("text", "count"), [("0-3,8,10-11\n", 7), ("5", 1), ("", 0), ("0-63\n", 64)]
)
def test_cpuset_counts(text, count):
    assert parse_cpuset(text) == count


@pytest.mark.parametrize("text", ["3-1", "a", "0,,1", "0-3,", "\x00\xff\xfe", "1-", "-1"])
def test_cpuset_garbage_raises(text):
    # "\x00\xff\xfe" used to count as 1 CPU, "3-1" as -1.
    with pytest.raises(ValueError):
        parse_cpuset(text)


@pytest.mark.parametrize(
    ("files", "field", "reason"),
    [
        ({"memory.max": ""}, "memory_limit", "/sys/fs/cgroup/memory.max: not an integer: ''"),
        ({"memory.max": "-1\n"}, "memory_limit", "/sys/fs/cgroup/memory.max: negative: '-1'"),
        (
            {"memory.current": "-5\n"},
            "memory_current",
            "/sys/fs/cgroup/memory.current: negative: '-5'",
        ),
        (
            {"memory.events": "oom 0\noom_kill -3\n"},
            "oom_kills",
            "/sys/fs/cgroup/memory.events oom_kill: negative: '-3'",
        ),
        (
            {"memory.events": "oom_kill\n"},
            "oom_kills",
            "/sys/fs/cgroup/memory.events oom_kill: not an integer: ''",
        ),
        ({"cpu.max": "max\n"}, "cpu_quota", "/sys/fs/cgroup/cpu.max: not '$MAX $PERIOD': 'max'"),
        (
            {"cpu.max": "0 100000\n"},
            "cpu_quota",
            "/sys/fs/cgroup/cpu.max: not '$MAX $PERIOD': '0 100000'",
        ),
        (
            {"cpu.max": "100000 0\n"},
            "cpu_quota",
            "/sys/fs/cgroup/cpu.max: not '$MAX $PERIOD': '100000 0'",
        ),
        (
            {"cpuset.cpus.effective": "\x00\xff\xfe"},
            "cpuset",
            "/sys/fs/cgroup/cpuset.cpus.effective: not a cpu list: '\\x00\ufffd\ufffd'",
        ),
        (
            {"cpuset.cpus.effective": "3-1\n"},
            "cpuset",
            "/sys/fs/cgroup/cpuset.cpus.effective: not a cpu list: '3-1'",
        ),
    ],
)
def test_garbage_cgroup_v2_files_are_unknown(fixture_root, files, field, reason):
    root = fixture_root("docker-v2-default")
    for name, text in files.items():
        (root / CG / name).write_bytes(text.encode("latin-1"))
    fact = getattr(facts(root).cgroup, field)
    assert fact == Fact.unknown(reason)


def test_intact_v2_tree_still_reads_exactly(fixture_root):
    cg = facts(fixture_root("docker-v2-default")).cgroup
    assert (cg.memory_limit.value, cg.cpu_quota.value, cg.cpuset.value) == (8 << 30, 2.0, 16)


def test_v1_cfs_quota_minus_one_is_no_quota_and_garbage_is_unknown(fixture_root):
    root = fixture_root("docker-v1-ipc-host")
    quota = root / CG / "cpu,cpuacct" / "cpu.cfs_quota_us"
    assert facts(root).cgroup.cpu_quota == Fact[float](None)  # the tree's -1
    quota.write_text("-7\n")
    assert facts(root).cgroup.cpu_quota == Fact.unknown(
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us: neither -1 nor positive: -7"
    )
    quota.write_text("150000\n")
    (root / CG / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("0\n")
    assert facts(root).cgroup.cpu_quota == Fact.unknown(
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us: not positive: 0"
    )


def test_meminfo_with_unicode_digits_is_unknown_not_a_traceback(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text(
        "MemTotal:       \u00b2 kB\nMemAvailable:   abc kB\nSwapTotal:      0 kB\n"
        "SwapFree:       0 kB\nShmem:          12 MB\n"
    )
    mem = read_meminfo(tmp_path)
    assert mem.total == Fact.unknown("/proc/meminfo: MemTotal: not 'N kB': '\u00b2 kB'")
    assert mem.available == Fact.unknown("/proc/meminfo: MemAvailable: not 'N kB': 'abc kB'")
    assert mem.shmem == Fact.unknown("/proc/meminfo: Shmem: not 'N kB': '12 MB'")
    assert (mem.swap_total, mem.swap_free) == (Fact.known(0), Fact.known(0))


def test_limits_with_unicode_digits_is_unknown_not_a_traceback(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max open files            10\u00b24                 1024                 files     \n"
    )
    lim = read_limits(tmp_path, "/proc/self/limits")
    assert lim.nofile_soft == Fact.unknown(
        "/proc/self/limits: Max open files: not a number: '10\u00b24'"
    )
    assert lim.nofile_hard == Fact.known(1024)


def test_limits_binary_garbage_is_unknown(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/limits").write_bytes(bytes(range(256)))
    lim = read_limits(tmp_path, "/proc/self/limits")
    assert lim.nofile_soft == Fact.unknown("/proc/self/limits: no 'Max open files' row")


def test_sysv_with_unicode_digits_is_unknown(tmp_path):
    (tmp_path / "proc/sysvipc").mkdir(parents=True)
    (tmp_path / "proc/sysvipc/shm").write_text("key shmid size nattch\n1 2 \u00b2 0\n")
    assert read_sysv(tmp_path) == Fact.unknown("/proc/sysvipc/shm: not in proc(5) format")


def test_truncated_mountinfo_is_refused_not_read_as_a_clipped_mount(fixture_root):
    root = fixture_root("docker-v2-default")
    mountinfo = root / "proc/self/mountinfo"
    # Cut inside the first line: what is left still looks like "/ on overlay".
    mountinfo.write_text(mountinfo.read_text()[:200])
    f = facts(root)
    why = "mountinfo: line 1: truncated (no end of line)"
    assert f.shm.fstype == Fact.unknown(why)
    assert f.shm.sizing == Fact.unknown(why)
    assert f.cgroup.memory_limit == Fact.unknown(why)


@pytest.mark.parametrize(
    "line",
    [
        "22 1 259:2 / / rw - ext4 /dev/root rw extra\n",  # a field too many after "-"
        "22 1 25x:2 / / rw - ext4 /dev/root rw\n",  # device not major:minor
        "22 1 259:2 / / rw - ext4\n",  # fields missing after "-"
    ],
)
def test_malformed_mountinfo_lines(line):
    with pytest.raises(MountinfoError, match="line 1: not in proc"):
        parse_mountinfo(line)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], "not an object of paths"),
        ({"/dev/shm": {"f_frsize": 4096, "f_blocks": -5, "f_bfree": 0, "f_bavail": 0}}, "f_blocks"),
        (
            {"/dev/shm": {"f_frsize": 4096, "f_blocks": 10, "f_bfree": 1, "f_bavail": 1e3}},
            "f_bavail",
        ),
        (
            {"/dev/shm": {"f_frsize": 4096, "f_blocks": 10, "f_bfree": 20, "f_bavail": 20}},
            "f_bavail <= f_bfree <= f_blocks",
        ),
        ({"/dev/shm": {"f_frsize": 0, "f_blocks": 1, "f_bfree": 1, "f_bavail": 1}}, "f_frsize > 0"),
    ],
)
def test_statvfs_record_is_checked(tmp_path, record, message):
    # These used to give negative sizes (-20480 total) or a float accepted as int.
    (tmp_path / "statvfs.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"statvfs\.json: not a statvfs record") as err:
        statvfs_from_json(tmp_path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_statvfs_record_binary_names_the_file(tmp_path):
    (tmp_path / "statvfs.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match=r"statvfs\.json: not a statvfs record"):
        statvfs_from_json(tmp_path)


def test_unlookable_dev_shm_is_unknown_not_missing(fixture_root):
    # A symlink loop makes stat() fail with ELOOP, as /proc/<pid>/root fails with EACCES for
    # a process we may not look into: neither means "no /dev/shm".
    root = fixture_root("docker-v2-default")
    (root / "dev/shm").rmdir()
    os.symlink("shm", root / "dev/shm")
    f = facts(root)
    reason = f"{root}/dev/shm: too many levels of symbolic links"
    assert f.shm.exists == Fact.unknown(reason)
    assert f.shm.total == Fact.unknown(reason)
    assert f.holders == Fact.unknown(reason)


def test_unreadable_target_root_makes_runtime_unknown(tmp_path):
    loop = tmp_path / "root"
    os.symlink("root", loop)
    rt = detect_runtime(loop, None, None, ("/proc/7/environ: permission denied",))
    assert rt.name == "unknown"
    assert rt.evidence == (
        "could not read /proc/7/environ: permission denied",
        f"could not read {loop}: too many levels of symbolic links",
    )


def test_readable_target_without_markers_is_none(tmp_path):
    assert detect_runtime(tmp_path, {}, "0::/\n") == detect_runtime(tmp_path, {}, None)
    assert detect_runtime(tmp_path, {}, "0::/\n").name == "none"


def test_markers_still_win_over_unreadable_sources(fixture_root):
    root = fixture_root("docker-v2-default")
    (root / "proc/self/environ").unlink()
    f = facts(root)
    assert f.runtime.name == "docker"
    assert f.runtime.evidence == (
        "/.dockerenv exists",
        "could not read /proc/self/environ: no such file or directory",
    )


def test_mount_for_follows_parents_not_the_longest_prefix():
    text = (
        "22 1 259:2 / / rw - ext4 /dev/root rw\n"
        "23 22 0:5 / /dev rw - devtmpfs devtmpfs rw\n"
        "25 23 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=1024k\n"
        "26 25 0:27 / /dev/shm rw - tmpfs tmpfs rw,size=2048k\n"  # stacked: the visible one
        "40 22 0:40 / /dev rw - tmpfs tmpfs rw,size=1k\n"  # a new /dev hides 23, 25, 26
    )
    mounts = parse_mountinfo(text)
    hit = mount_for(mounts, "/dev/shm")
    assert hit is not None and hit.mount_id == 40
    assert mount_for(mounts[:4], "/dev/shm").mount_id == 26  # type: ignore[union-attr]


def test_mount_for_survives_a_parent_cycle():
    text = (
        "1 0 0:1 / / rw - ext4 a rw\n"
        "5 1 0:2 / /x rw - tmpfs b rw\n"
        "6 5 0:3 / /x rw - tmpfs c rw\n"
        "5 6 0:4 / /x rw - tmpfs d rw\n"
    )
    hit = mount_for(parse_mountinfo(text), "/x/y")
    assert hit is not None and hit.source in ("c", "d")


def test_resolve_takes_absolute_links_from_the_target_root(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "run/shm").mkdir(parents=True)
    os.symlink("/run/shm", tmp_path / "dev/shm")
    assert resolve(tmp_path, "/dev/shm") == "/run/shm"
    os.symlink("../run/shm", tmp_path / "dev/rel")
    assert resolve(tmp_path, "/dev/rel") == "/run/shm"
    os.symlink("/dev/loop", tmp_path / "dev/loop")
    assert resolve(tmp_path, "/dev/loop") == "/dev/loop"  # a loop stops, never hangs
    assert resolve(tmp_path, "/dev/none") == "/dev/none"

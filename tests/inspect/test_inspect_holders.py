"""scan_holders against real processes holding real (mostly unlinked) files in a private tmpfs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from shmguard.inspect.holders import KINDS, classify_shm_name, scan_holders
from shmguard.units import KiB, MiB

pytestmark = pytest.mark.timeout(60)

# Creates, in its private /dev/shm, files the way each owner does, then forks a child that
# inherits all of them and adds one of its own. Prints pids and inodes as JSON.
HOLDER = textwrap.dedent(
    """
    import ctypes, json, os, sys

    LIBC = ctypes.CDLL(None, use_errno=True)
    LIBC.mmap.restype = ctypes.c_void_p
    LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]

    def map_shared(fd, size):
        # Python's mmap.mmap keeps a dup of the fd; the C call does not, like torch and NCCL.
        addr = LIBC.mmap(None, size, 3, 1, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        return addr

    def make(name, size, *, alloc=True, unlink=True, keep_fd=True, map_it=False):
        path = "/dev/shm/" + name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, size)
        if alloc:
            os.posix_fallocate(fd, 0, size)
        m = map_shared(fd, size) if map_it else None
        ino = os.fstat(fd).st_ino
        if unlink:
            os.unlink(path)
        if not keep_fd:
            os.close(fd)
        KEEP.append(m)
        return ino

    KEEP = []
    inodes = {
        "torch": make("torch_100_200_0", 1 << 20, map_it=True),        # fd strategy: fd + map
        "torch_zero": make("torch_100_200_1", 10 << 20, alloc=False, unlink=False),  # failed
        "nccl": make("nccl-AbC123", 2 << 20, keep_fd=False, map_it=True),  # map only
        "sem": make("sem.mp-xyz", 4096, keep_fd=False, map_it=True),       # map only
        "psm": make("psm_0a1b2c", 256 << 10, unlink=False),                # named, fd
        "plasma": make("plasmaQ1w2E3", 512 << 10),                          # unlinked fd
        "other": make("myapp.buf", 8 << 10),
    }
    r, w = os.pipe()          # parent -> child: "you may exit"
    ready_r, ready_w = os.pipe()  # child -> parent: "my own file exists"
    child = os.fork()
    if child == 0:
        os.close(w)
        inodes["child_torch"] = make("torch_101_300_0", 3 << 20)
        os.write(ready_w, b"x")
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    os.read(ready_r, 1)
    print(json.dumps({"pid": os.getpid(), "child": child, "inodes": inodes}), flush=True)
    sys.stdin.read()
    os.close(w)
    os.waitpid(child, 0)
    """
)


def test_attributes_every_kind_across_processes_counting_each_inode_once(holder):
    h = holder(HOLDER)
    pid, child = h.info["pid"], h.info["child"]
    scan = scan_holders(pids=[pid, child])

    assert scan.errors == ()
    assert [p.pid for p in scan.processes] == [pid, child]
    main = scan.processes[0]
    assert main.name == "python3" or main.name.startswith("python")
    by_name = {os.path.basename(f.path): f for f in main.files}
    assert set(by_name) == {
        "torch_100_200_0",
        "torch_100_200_1",
        "nccl-AbC123",
        "sem.mp-xyz",
        "psm_0a1b2c",
        "plasmaQ1w2E3",
        "myapp.buf",
    }
    torch_file = by_name["torch_100_200_0"]
    assert (torch_file.bytes, torch_file.deleted, torch_file.kind, torch_file.via) == (
        MiB,
        True,
        "torch",
        "fd",
    )
    assert torch_file.inode == h.info["inodes"]["torch"]
    assert torch_file.path == "/dev/shm/torch_100_200_0"
    zero = by_name["torch_100_200_1"]
    assert (zero.bytes, zero.deleted, zero.via) == (0, False, "fd")  # st_blocks, not st_size
    nccl = by_name["nccl-AbC123"]
    assert (nccl.bytes, nccl.deleted, nccl.kind, nccl.via) == (2 * MiB, True, "nccl", "map")
    sem = by_name["sem.mp-xyz"]
    assert (sem.bytes, sem.kind, sem.via) == (4096, "semaphore", "map")
    psm = by_name["psm_0a1b2c"]
    assert (psm.bytes, psm.deleted, psm.kind) == (256 * KiB, False, "psm")
    assert by_name["plasmaQ1w2E3"].kind == "plasma"
    assert by_name["myapp.buf"].kind == "other"

    main_bytes = MiB + 2 * MiB + 4096 + 256 * KiB + 512 * KiB + 8 * KiB
    assert main.bytes == main_bytes
    # The child inherited every fd and mapping and added 3 MiB of its own.
    assert scan.processes[1].bytes == main_bytes + 3 * MiB
    assert dict(scan.by_kind) == {
        "torch": MiB + 3 * MiB,
        "nccl": 2 * MiB,
        "psm": 256 * KiB,
        "plasma": 512 * KiB,
        **dict.fromkeys(("chromium", "postgres", "mpi", "ucx"), 0),
        "semaphore": 4096,
        "other": 8 * KiB,
    }
    assert scan.total_bytes == main_bytes + 3 * MiB


def test_full_scan_finds_holders_in_another_namespace(holder):
    h = holder(HOLDER)
    scan = scan_holders()
    pids = {p.pid for p in scan.processes}
    assert {h.info["pid"], h.info["child"]} <= pids
    # The holder's 64 MiB tmpfs is a different device from the host's /dev/shm.
    devices = {f.device for p in scan.processes if p.pid == h.info["pid"] for f in p.files}
    assert len(devices) == 1
    assert devices != {os.stat("/dev/shm").st_dev}


def test_missing_pid_is_an_error_line_not_an_exception():
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid = int(gone.stdout)
    scan = scan_holders(pids=[pid])
    assert scan.processes == ()
    assert scan.errors == (f"pid {pid}: no such process",)
    assert scan.total_bytes == 0
    assert dict(scan.by_kind) == dict.fromkeys(KINDS, 0)


def test_survives_processes_exiting_during_scans():
    # A shell forks short-lived children as fast as it can while we scan the whole /proc.
    churn = subprocess.Popen(["sh", "-c", "while :; do /bin/true; done"])
    try:
        for _ in range(40):
            scan = scan_holders()
            assert all("no such process" not in e for e in scan.errors)
    finally:
        churn.kill()
        churn.wait(timeout=10)


def test_unreadable_entries_are_recorded(tmp_path: Path):
    # A fixture root: pid 7 has a comm but its fd "directory" is a file (ENOTDIR) and no maps.
    proc = tmp_path / "proc" / "7"
    proc.mkdir(parents=True)
    (proc / "comm").write_text("python\n")
    (proc / "fd").write_text("")
    scan = scan_holders(root=tmp_path)
    assert scan.processes == ()
    # The missing maps file reads as "process gone" and is not an error.
    assert scan.errors == (f"pid 7: {tmp_path}/proc/7/fd: not a directory",)


def test_near_a_pid_scans_only_its_namespaces(tmp_path: Path):
    # doctor --pid N reported the host's pid 1 as unreadable: it scanned every host process.
    # A fixture root: 100 and 101 share a mount namespace, 200 shares only the IPC one (a
    # pod's other container), 300 shares neither, pid 1's namespaces cannot be read. Each
    # maps "file" is a directory, so a scanned process leaves an error line.
    links = {100: ("9", "9"), 101: ("9", "9"), 200: ("8", "9"), 300: ("7", "7"), 1: None}
    for pid, ns in links.items():
        proc = tmp_path / "proc" / str(pid)
        (proc / "fd").mkdir(parents=True)
        (proc / "maps").mkdir()
        (proc / "comm").write_text("python\n")
        if ns is not None:
            (proc / "ns").mkdir()
            (proc / "ns" / "mnt").symlink_to(f"mnt:[{ns[0]}]")
            (proc / "ns" / "ipc").symlink_to(f"ipc:[{ns[1]}]")

    def scanned(scan: object) -> list[str]:
        return [e.split(":")[0] for e in scan.errors]  # type: ignore[attr-defined]

    assert scanned(scan_holders(root=tmp_path, near=100)) == ["pid 100", "pid 101", "pid 200"]
    # Where the pid's own namespaces cannot be read, every process, as without a pid.
    everyone = ["pid 1", "pid 100", "pid 101", "pid 200", "pid 300"]
    assert scanned(scan_holders(root=tmp_path, near=1)) == everyone
    assert scanned(scan_holders(root=tmp_path)) == everyone


def test_missing_proc_is_one_error(tmp_path: Path):
    scan = scan_holders(root=tmp_path)
    assert scan.processes == ()
    assert scan.errors == (f"{tmp_path}/proc: no such file or directory",)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("torch_123_456789_0", "torch"),
        ("/torch_1_2_3", "torch"),
        ("/dev/shm/torch_1_2_3 (deleted)", "torch"),
        ("nccl-a1B2c3", "nccl"),
        ("/dev/shm/nccl-XyZ (deleted)", "nccl"),
        ("psm_5f3a9b1c", "psm"),
        ("plasmaAbCdEf", "plasma"),
        ("sem.mp-k2j3h4", "semaphore"),
        ("/dev/shm/sem.loky-1-x (deleted)", "semaphore"),
        # The other programs that live on /dev/shm (issue 22).
        ("/dev/shm/.org.chromium.Chromium.Xy12Ab (deleted)", "chromium"),
        (".com.google.Chrome.q1W2e3", "chromium"),
        (".com.microsoft.Edge.a1B2c3", "chromium"),
        ("/PostgreSQL.1804289383", "postgres"),
        ("vader_segment.node01.7c2a0001.0", "mpi"),
        ("sm_segment.user.node01.7c2a0001.1", "mpi"),
        ("psm2_shm.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "mpi"),
        ("ucx_shm_posix_3f2a9c1d", "ucx"),
        ("postgresql.1", "other"),
        ("org.chromium.Chromium.x", "other"),
        ("torch", "other"),
        ("ncclX", "other"),
        ("my_torch_1", "other"),
        ("", "other"),
    ],
)
def test_classify_shm_name(name: str, kind: str):
    assert classify_shm_name(name) == kind


@pytest.mark.parametrize(
    ("program", "kind"),
    [("postgres", "postgres"), ("chrome", "chromium"), ("orted", "mpi"), ("prterun", "mpi")],
)
def test_a_file_of_no_known_name_is_its_holders_program(program: str, kind: str):
    assert classify_shm_name("/dev/shm/segment.42 (deleted)", program) == kind
    # A known name wins over the holder: a torch file in a postgres process stays torch's.
    assert classify_shm_name("/dev/shm/torch_1_2_3", program) == "torch"
    assert classify_shm_name("/dev/shm/segment.42", "python") == "other"


def test_scan_names_holders_by_program(tmp_path: Path):
    # A root whose processes hold files this test creates: a postgres backend (a segment by
    # name and an unnamed one), Chromium's unlinked file, an orted with a file of no known name.
    shm = tmp_path / "shm"
    shm.mkdir()
    held = {
        11: ("postgres", ["PostgreSQL.2203", "anon.1"]),
        12: ("chrome", [".org.chromium.Chromium.AbC123"]),
        13: ("orted", ["job.7"]),
        14: ("python", ["mystery.bin"]),
    }
    for pid, (comm, names) in held.items():
        proc = tmp_path / "proc" / str(pid)
        (proc / "fd").mkdir(parents=True)
        (proc / "comm").write_text(comm + "\n")
        (proc / "maps").write_text("")
        for fd, name in enumerate(names, start=3):
            (shm / name).write_bytes(b"x" * (pid * 4 * KiB))
            (proc / "fd" / str(fd)).symlink_to(shm / name)
    scan = scan_holders(root=tmp_path, shm_prefix=f"{shm}/")
    kinds = {f.path.rsplit("/", 1)[-1]: f.kind for p in scan.processes for f in p.files}
    assert kinds == {
        "PostgreSQL.2203": "postgres",
        "anon.1": "postgres",
        ".org.chromium.Chromium.AbC123": "chromium",
        "job.7": "mpi",
        "mystery.bin": "other",
    }
    blocks = {k: os.stat(shm / n).st_blocks * 512 for k, n in (("pg", "anon.1"), ("mpi", "job.7"))}
    assert scan.by_kind["postgres"] == 2 * blocks["pg"] and scan.by_kind["mpi"] == blocks["mpi"]
    assert scan.by_kind["chromium"] > 0 and scan.by_kind["other"] > 0


TORCH_HOLDER = textwrap.dedent(
    """
    import json, os, sys
    import torch
    t = torch.zeros(10 * 1024 * 1024 // 4, dtype=torch.float32)  # 10 MiB
    t.share_memory_()  # default file_descriptor strategy: created, unlinked, fd kept
    strategy = torch.multiprocessing.get_sharing_strategy()
    print(json.dumps({"pid": os.getpid(), "strategy": strategy}), flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.timeout(120)
def test_real_torch_share_memory_is_attributed(holder):
    pytest.importorskip("torch")
    h = holder(TORCH_HOLDER)
    assert h.info["strategy"] == "file_descriptor"
    scan = scan_holders(pids=[h.info["pid"]])
    assert scan.errors == ()
    (proc,) = scan.processes
    torch_files = [f for f in proc.files if f.kind == "torch"]
    assert len(torch_files) == 1
    f = torch_files[0]
    assert f.deleted and f.via == "fd" and f.bytes == 10 * MiB
    assert os.path.basename(f.path).startswith(f"torch_{h.info['pid']}_")
    assert scan.by_kind["torch"] == 10 * MiB


@pytest.fixture
def shm_tmp() -> Iterator[Path]:
    """A scratch directory on the host's tmpfs /dev/shm (exact block counts), removed after."""
    path = Path(tempfile.mkdtemp(prefix="shmguard-test-", dir="/dev/shm"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_named_files_nobody_holds_are_listed_once(shm_tmp: Path):
    # PyTorch's file_system strategy keeps queued batches as named files no process holds
    # open; a listing of the directory finds them. Held files and zero-block names do not
    # appear there.
    tmp_path = shm_tmp
    (tmp_path / "torch_7_11_0").write_bytes(b"x" * (3 * 4096))
    (tmp_path / "psm_abc").write_bytes(b"y" * 4096)
    sparse = tmp_path / "torch_7_11_1"
    sparse.touch()
    os.truncate(sparse, 1 << 20)  # a failed allocation: size set, no blocks
    held = tmp_path / "nccl-held"
    held.write_bytes(b"z" * 8192)
    (tmp_path / "subdir").mkdir()
    with held.open("rb"):
        scan = scan_holders(pids=[os.getpid()], shm_prefix=f"{tmp_path}/", shm_dir=tmp_path)
    assert [(f.path, f.bytes, f.kind, f.via) for f in scan.unheld] == [
        (f"{tmp_path}/psm_abc", 4096, "psm", "name"),
        (f"{tmp_path}/torch_7_11_0", 3 * 4096, "torch", "name"),
    ]
    assert scan.by_kind["torch"] == 3 * 4096
    assert scan.by_kind["psm"] == 4096
    assert scan.by_kind["nccl"] == 8192  # held through our fd, counted once
    assert scan.total_bytes == 3 * 4096 + 4096 + 8192


def test_unlistable_shm_dir_is_an_error_line(tmp_path: Path):
    scan = scan_holders(pids=[], shm_dir=tmp_path / "missing")
    assert scan.unheld == ()
    assert scan.errors == (f"{tmp_path}/missing: no such file or directory",)

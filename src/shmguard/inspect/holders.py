"""Who holds /dev/shm: per process, the shm files it has open (fd) or mapped, unlinked ones too.

PyTorch's default ``file_descriptor`` sharing strategy unlinks each ``/dev/shm/torch_*`` file
about a millisecond after creating it and keeps the fd (and a mapping), so ``ls`` and ``du`` of
/dev/shm see nothing while statvfs counts every page (../shared/research/torch_shm.md, section
1.2). The only way to attribute those pages is to ``stat()`` each ``/proc/<pid>/fd/<n>`` whose
link points under /dev/shm (the kernel follows the link to the open file, deleted or not) and
sum ``st_blocks * 512`` per unique inode. Files that are only mapped (fd closed) are found in
``/proc/<pid>/maps`` and measured through ``/proc/<pid>/map_files/<range>`` (needs
CAP_SYS_ADMIN, which root has).

The scan uses plain ``os`` calls rather than psutil: psutil's ``open_files()`` drops deleted
files (it filters on ``os.path.isfile``), which are exactly the ones that matter, and it costs
a Python object per fd. The sampler runs this at a few Hz next to a training job.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from shmguard.model.host import HoldersScan, ProcessHolding, ShmFile

#: Owner kinds, in the order reports list them: the ML ones, then the other programs that
#: live on /dev/shm (issue 22: browsers, PostgreSQL, MPI, UCX).
KINDS = (
    "torch", "nccl", "psm", "plasma", "chromium", "postgres", "mpi", "ucx", "semaphore", "other",
)  # fmt: skip

#: Name prefixes of the other programs' /dev/shm files, by kind (see :func:`classify_shm_name`).
_PREFIXES = (
    # Chromium base/memory/platform_shared_memory_region_posix.cc: a temporary file in the
    # shm directory, named after the product's bundle id (Chrome, Chromium, Edge, Electron
    # apps, headless shell), unlinked once created and held through its fd.
    (".org.chromium.", "chromium"),
    (".com.google.Chrome.", "chromium"),
    (".com.microsoft.Edge.", "chromium"),
    # PostgreSQL src/backend/storage/ipc/dsm_impl.c: dynamic shared memory segments
    # "/PostgreSQL.<number>" (dynamic_shared_memory_type = posix).
    ("PostgreSQL.", "postgres"),
    # Open MPI's shared-memory BTL: vader (2.x-4.x) "vader_segment.<host>.<jobid>.<rank>",
    # sm (5.x) "sm_segment.<user>.<host>.<jobid>.<rank>"; Intel PSM2 (Omni-Path) "psm2_shm.*".
    ("vader_segment.", "mpi"),
    ("sm_segment.", "mpi"),
    ("psm2_shm.", "mpi"),
    # UCX src/uct/sm/mm/posix/mm_posix.c: "ucx_shm_posix_<hex>".
    ("ucx_shm_posix_", "ucx"),
)

#: Process names (``/proc/<pid>/comm``, at most 15 characters) of those programs: a file with
#: a name of no known kind that such a process holds is counted as that program's.
_PROGRAMS = {
    "chrome": "chromium",
    "chromium": "chromium",
    "chromium-browse": "chromium",
    "headless_shell": "chromium",
    "msedge": "chromium",
    "postgres": "postgres",
    "postmaster": "postgres",
    "orted": "mpi",
    "prted": "mpi",
    "prterun": "mpi",
    "mpirun": "mpi",
    "mpiexec": "mpi",
    "hydra_pmi_proxy": "mpi",
}

_DELETED = " (deleted)"
#: errnos meaning "the process or fd went away while we looked": not an error.
_GONE = (errno.ENOENT, errno.ESRCH)


def classify_shm_name(name: str, program: str | None = None) -> str:
    """The owner kind of a /dev/shm file from its name.

    Args:
        name: a bare name (``torch_12_34_0``), a ``shm_open`` name (``/torch_12_34_0``) or a
            full path (``/dev/shm/torch_12_34_0 (deleted)``); the last path component counts.
        program: the holding process's name (``comm``), when known: a name of no known kind
            held by ``postgres``, ``chrome``, ``orted``... is that program's.

    Returns:
        one of :data:`KINDS`:

        * ``torch``: PyTorch ``at::MapAllocator`` names ``/torch_<pid>_<random>_<counter>``
          (aten/src/ATen/MapAllocator.cpp, torch_shm.md section 1.1);
        * ``nccl``: NCCL's shm transport and proxy files ``nccl-<random>``
          (src/transport/shm.cc, ``/dev/shm/nccl-XXXXXX``);
        * ``psm``: Python ``multiprocessing.shared_memory`` default names ``psm_<hex>``
          (Lib/multiprocessing/shared_memory.py, ``_SHM_NAME_PREFIX``);
        * ``plasma``: Ray's object store ``plasmaXXXXXX`` (src/ray/object_manager/plasma/
          dlmalloc.cc, ``mkstemp``);
        * ``chromium``: Chrome, Chromium, Edge and Electron's ``.org.chromium.Chromium.*``,
          ``.com.google.Chrome.*``, ``.com.microsoft.Edge.*``;
        * ``postgres``: PostgreSQL's dynamic shared memory ``PostgreSQL.<number>``;
        * ``mpi``: Open MPI's ``vader_segment.*`` and ``sm_segment.*``, PSM2's ``psm2_shm.*``;
        * ``ucx``: UCX's posix transport ``ucx_shm_posix_<hex>``;
        * ``semaphore``: glibc POSIX named semaphores ``sem.<name>`` (sem_open(3));
        * ``other``: anything else, unless ``program`` names one of the programs above.
    """
    if name.endswith(_DELETED):
        name = name[: -len(_DELETED)]
    base = name.rsplit("/", 1)[-1]
    if base.startswith("torch_"):
        return "torch"
    if base.startswith("nccl-"):
        return "nccl"
    if base.startswith("psm_"):
        return "psm"
    if base.startswith("plasma"):
        return "plasma"
    for prefix, kind in _PREFIXES:
        if base.startswith(prefix):
            return kind
    if base.startswith("sem."):
        return "semaphore"
    if program is not None:
        return _PROGRAMS.get(program, "other")
    return "other"


def _err_text(err: OSError) -> str:
    return (err.strerror or str(err)).lower()


class _Scanner:
    """One scan's state: the unique inodes seen so far and the errors."""

    def __init__(self, proc: str, shm_prefix: str) -> None:
        self.proc = proc
        self.prefix = shm_prefix
        self.seen: dict[tuple[int, int], ShmFile] = {}
        self.errors: list[str] = []
        self.map_errors: set[int] = set()
        #: The name of the process being read, for :func:`classify_shm_name`.
        self.comm: str | None = None

    def process(self, pid: int, explicit: bool) -> ProcessHolding | None:
        base = f"{self.proc}/{pid}"
        try:
            with open(f"{base}/comm", encoding="utf-8", errors="replace") as fh:
                name = fh.read().rstrip("\n")
        except OSError as err:
            if explicit or err.errno not in _GONE:
                reason = "no such process" if err.errno in _GONE else _err_text(err)
                self.errors.append(f"pid {pid}: {reason}")
            return None
        files: dict[tuple[int, int], ShmFile] = {}
        self.comm = name
        self._fds(pid, base, files)
        self._maps(pid, base, files)
        if not files:
            return None
        ordered = tuple(sorted(files.values(), key=lambda f: (f.path, f.inode)))
        return ProcessHolding(pid, name, ordered, sum(f.bytes for f in ordered))

    def _fds(self, pid: int, base: str, files: dict[tuple[int, int], ShmFile]) -> None:
        fd_dir = f"{base}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError as err:
            if err.errno not in _GONE:
                self.errors.append(f"pid {pid}: {fd_dir}: {_err_text(err)}")
            return
        prefix = self.prefix
        for fd in fds:
            link = f"{fd_dir}/{fd}"
            try:
                target = os.readlink(link)
            except OSError:
                continue  # closed between listdir and readlink
            if not target.startswith(prefix):
                continue
            try:
                st = os.stat(link)  # follows the magic link to the open file, even if deleted
            except OSError as err:
                if err.errno not in _GONE:
                    self.errors.append(f"pid {pid}: {link}: {_err_text(err)}")
                continue
            self._add(files, target, st.st_dev, st.st_ino, st.st_blocks * 512, "fd")

    def _maps(self, pid: int, base: str, files: dict[tuple[int, int], ShmFile]) -> None:
        maps = f"{base}/maps"
        try:
            with open(maps, "rb") as fh:
                data = fh.read()
        except OSError as err:
            if err.errno not in _GONE:
                self.errors.append(f"pid {pid}: {maps}: {_err_text(err)}")
            return
        needle = b" " + self.prefix.encode()
        pos = data.find(needle)
        while pos != -1:
            # Jump from match to match: a torch process maps thousands of libraries.
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            end = len(data) if end == -1 else end
            pos = data.find(needle, end)
            # "start-end perms offset major:minor inode   pathname" (proc(5))
            parts = data[start:end].split(None, 5)
            if len(parts) < 6:
                continue
            target = parts[5].decode("utf-8", "surrogateescape")
            if not target.startswith(self.prefix):
                continue
            major, _, minor = parts[3].partition(b":")
            dev = os.makedev(int(major, 16), int(minor, 16))
            ino = int(parts[4])
            if (dev, ino) in files:
                continue
            size = self._map_bytes(pid, base, parts[0].decode(), target, dev, ino)
            if size is None:
                continue
            self._add(files, target, dev, ino, size, "map")

    def _map_bytes(
        self, pid: int, base: str, span: str, target: str, dev: int, ino: int
    ) -> int | None:
        known = self.seen.get((dev, ino))
        if known is not None:
            return known.bytes
        link = f"{base}/map_files/{span}"
        try:
            return os.stat(link).st_blocks * 512
        except OSError as err:
            if err.errno in _GONE:
                return None  # unmapped or exited meanwhile
            if pid not in self.map_errors:  # one line per process, not one per mapping
                self.map_errors.add(pid)
                self.errors.append(f"pid {pid}: {link}: {_err_text(err)}")
            return None

    def _add(
        self,
        files: dict[tuple[int, int], ShmFile],
        target: str,
        dev: int,
        ino: int,
        size: int,
        via: str,
    ) -> None:
        key = (dev, ino)
        if key in files:
            return
        deleted = target.endswith(_DELETED)
        path = target[: -len(_DELETED)] if deleted else target
        shm = ShmFile(path, ino, size, deleted, classify_shm_name(path, self.comm), via, dev)
        files[key] = shm
        self.seen.setdefault(key, shm)


def _namespaces(proc: str, pid: int | str) -> tuple[str, str] | None:
    """``pid``'s mount and IPC namespace links (``mnt:[4026531832]``), or None when they
    cannot be read (gone, or another user's process: ptrace access mode)."""
    try:
        return os.readlink(f"{proc}/{pid}/ns/mnt"), os.readlink(f"{proc}/{pid}/ns/ipc")
    except OSError:
        return None


def scan_holders(
    root: Path = Path("/"),
    pids: Iterable[int] | None = None,
    shm_prefix: str = "/dev/shm/",
    shm_dir: str | os.PathLike[str] | None = None,
    near: int | None = None,
) -> HoldersScan:
    """Find every process holding /dev/shm files and how many bytes each holds.

    Args:
        root: filesystem root whose ``proc/`` is read (``/`` for this host).
        pids: only these processes (a missing one is recorded in ``errors``); default all
            numeric entries of ``root/proc``, where processes that exit mid-scan are skipped.
        shm_prefix: keep fd/map targets starting with this (the kernel writes paths as the
            holder's mount namespace sees them, so a container's files still read
            ``/dev/shm/...``).
        shm_dir: also list this directory (the same /dev/shm as seen from here, e.g.
            ``/proc/<pid>/root/dev/shm``) and report named files nobody holds in ``unheld``.
        near: without ``pids``, only the processes that share this pid's mount or IPC
            namespace (its container, and the other containers of its pod, which share the
            pod's IPC namespace and /dev/shm); a process whose namespaces cannot be read is
            not one of them. When ``near``'s own cannot be read, every process is scanned.

    Returns:
        a :class:`HoldersScan`. Unreadable entries become lines in ``errors``; nothing is raised
        for /proc races or permissions.
    """
    proc = os.path.join(os.fspath(root), "proc")
    scanner = _Scanner(proc, shm_prefix)
    explicit = pids is not None
    if pids is None:
        try:
            pid_list = sorted(int(d) for d in os.listdir(proc) if d.isdigit())
        except OSError as err:
            return HoldersScan((), _empty_kinds(), 0, (f"{proc}: {_err_text(err)}",))
        own = _namespaces(proc, near) if near is not None else None
        if own is not None:
            mnt, ipc = own
            pid_list = [
                p
                for p in pid_list
                if (ns := _namespaces(proc, p)) and (ns[0] == mnt or ns[1] == ipc)
            ]
    else:
        pid_list = list(dict.fromkeys(pids))
    holdings = []
    for pid in pid_list:
        held = scanner.process(pid, explicit)
        if held is not None:
            holdings.append(held)
    unheld = _list_unheld(shm_dir, shm_prefix, scanner) if shm_dir is not None else ()
    by_kind = dict.fromkeys(KINDS, 0)
    for shm in (*scanner.seen.values(), *unheld):
        by_kind[shm.kind] += shm.bytes
    return HoldersScan(
        tuple(holdings),
        MappingProxyType(by_kind),
        sum(by_kind.values()),
        tuple(scanner.errors),
        unheld,
    )


def _list_unheld(
    shm_dir: str | os.PathLike[str], shm_prefix: str, scanner: _Scanner
) -> tuple[ShmFile, ...]:
    found = []
    try:
        entries = list(os.scandir(shm_dir))
    except OSError as err:
        scanner.errors.append(f"{os.fspath(shm_dir)}: {_err_text(err)}")
        return ()
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed while we listed: not an error
        if not stat.S_ISREG(st.st_mode) or st.st_blocks == 0:
            continue
        if (st.st_dev, st.st_ino) in scanner.seen:
            continue
        path = shm_prefix + entry.name
        found.append(
            ShmFile(
                path,
                st.st_ino,
                st.st_blocks * 512,
                False,
                classify_shm_name(path),
                "name",
                st.st_dev,
            )
        )
    return tuple(sorted(found, key=lambda f: f.path))


def _empty_kinds() -> Mapping[str, int]:
    return MappingProxyType(dict.fromkeys(KINDS, 0))


def restrict_to_device(scan: HoldersScan, device: int) -> HoldersScan:
    """The part of ``scan`` on one filesystem (``st_dev``): the /dev/shm being inspected, so
    another container's or the host's shm files are not counted."""
    processes = []
    by_kind = dict.fromkeys(KINDS, 0)
    seen: set[int] = set()
    for proc in scan.processes:
        files = tuple(f for f in proc.files if f.device == device)
        if not files:
            continue
        processes.append(ProcessHolding(proc.pid, proc.name, files, sum(f.bytes for f in files)))
        for f in files:
            if f.inode not in seen:
                seen.add(f.inode)
                by_kind[f.kind] += f.bytes
    unheld = tuple(f for f in scan.unheld if f.device == device)
    for f in unheld:
        if f.inode not in seen:
            seen.add(f.inode)
            by_kind[f.kind] += f.bytes
    return HoldersScan(
        tuple(processes), MappingProxyType(by_kind), sum(by_kind.values()), scan.errors, unheld
    )

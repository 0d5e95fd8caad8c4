"""Kernel-wide and per-process facts: /proc/meminfo, /proc/<pid>/limits, /proc/sysvipc/shm.

Formats: proc(5) (meminfo ``Key:  N kB``; limits table with columns Limit, Soft Limit, Hard
Limit, Units, ``unlimited`` for none; sysvipc/shm header line then one line per segment with
``size`` in bytes and ``nattch``).
"""

from __future__ import annotations

from pathlib import Path

from shmguard.inspect._read import parse_int, read_text
from shmguard.model import Fact
from shmguard.model.host import Limits, MemInfo, SysvShm


def read_meminfo(root: Path) -> MemInfo:
    """Read ``root/proc/meminfo``; each missing key is unknown with the reason."""
    text, reason = read_text(root, "/proc/meminfo")
    values: dict[str, int] = {}
    bad: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        number, _ = parse_int(fields[0], "") if fields else (None, None)
        if number is not None and fields[1:] in ([], ["kB"]):
            values[key] = number * (1024 if fields[1:] == ["kB"] else 1)
        else:
            bad[key] = rest.strip()[:40]

    def fact(key: str) -> Fact[int]:
        if text is None:
            return Fact.unknown(reason or "/proc/meminfo unreadable")
        if key in bad:
            return Fact.unknown(f"/proc/meminfo: {key}: not 'N kB': {bad[key]!r}")
        if key not in values:
            return Fact.unknown(f"/proc/meminfo: no {key} line")
        return Fact.known(values[key])

    return MemInfo(
        fact("MemTotal"), fact("MemAvailable"), fact("SwapTotal"), fact("SwapFree"), fact("Shmem")
    )


def read_limits(root: Path, path: str) -> Limits:
    """Read a ``/proc/<pid>/limits`` table at ``root/path``."""
    text, reason = read_text(root, path)
    rows: dict[str, tuple[str, str]] = {}
    for line in (text or "").splitlines()[1:]:
        # The name column is 26 characters wide (fs/proc/base.c proc_pid_limits).
        name, rest = line[:26].strip(), line[26:].split()
        if len(rest) >= 2:
            rows[name] = (rest[0], rest[1])

    def fact(name: str, col: int) -> Fact[int]:
        if text is None:
            return Fact.unknown(reason or f"{path} unreadable")
        if name not in rows:
            return Fact.unknown(f"{path}: no {name!r} row")
        value = rows[name][col]
        if value == "unlimited":
            return Fact[int](None)
        number, _ = parse_int(value, path)
        if number is None:
            return Fact.unknown(f"{path}: {name}: not a number: {value[:40]!r}")
        return Fact.known(number)

    return Limits(
        fact("Max open files", 0),
        fact("Max open files", 1),
        fact("Max locked memory", 0),
        fact("Max locked memory", 1),
    )


def read_sysv(root: Path) -> Fact[SysvShm]:
    """Read ``root/proc/sysvipc/shm``."""
    text, reason = read_text(root, "/proc/sysvipc/shm")
    if text is None:
        return Fact.unknown(reason or "/proc/sysvipc/shm unreadable")
    lines = text.splitlines()
    if not lines:
        return Fact.known(SysvShm(0, 0, 0))
    header = lines[0].split()
    try:
        size_col, nattch_col = header.index("size"), header.index("nattch")
        count = total = unattached = 0
        for line in lines[1:]:
            fields = line.split()
            if not fields:
                continue
            size, _ = parse_int(fields[size_col], "")
            nattch, _ = parse_int(fields[nattch_col], "")
            if size is None or nattch is None:
                raise ValueError(line)
            count += 1
            total += size
            unattached += nattch == 0
    except (ValueError, IndexError):
        return Fact.unknown("/proc/sysvipc/shm: not in proc(5) format")
    return Fact.known(SysvShm(count, total, unattached))

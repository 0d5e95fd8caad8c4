"""ENV011 `leftover-torch-files` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from shmguard.inspect.host import inspect_host
from shmguard.inspect.shm import statvfs_from_json
from shmguard.lint.doctor import diagnose
from shmguard.model import Fact, Severity


def test_env011_leftover_torch_files(fixture_root):
    root = fixture_root("docker-v2-default")
    shm = root / "dev" / "shm"
    with open(shm / "torch_77_123_0", "wb") as fh:
        fh.truncate(18874368)  # sparse: st_blocks 0, as a failed MapAllocator leaves it
    if os.stat(shm / "torch_77_123_0").st_blocks:
        pytest.skip("this filesystem does not keep truncated files sparse")
    (shm / "torch_77_123_1").write_bytes(b"x" * 4096)  # a live named file: not a leftover
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    report = diagnose(facts)
    assert [f.code for f in report.findings] == ["ENV001", "ENV011"]
    f = report.findings[1]
    assert f.message == (
        "1 zero-block torch_* file in /dev/shm (e.g. torch_77_123_0; largest request 18 MiB): "
        "failed allocations"
    )
    assert f.fix is not None and f.fix.description.startswith("Remove them when no job runs")


def test_env011_near_full_with_failed_allocations_is_an_error(fixture_root):
    # The case: a job hung with /dev/shm almost full and zero-block torch_* files.
    root = fixture_root("docker-v2-default")
    shm = root / "dev" / "shm"
    with open(shm / "torch_77_123_0", "wb") as fh:
        fh.truncate(24 * 2**20)
    if os.stat(shm / "torch_77_123_0").st_blocks:
        pytest.skip("this filesystem does not keep truncated files sparse")
    facts = inspect_host(root, statvfs=statvfs_from_json(root))
    mib = 2**20
    for used, severity in ((48 * mib, Severity.ERROR), (32 * mib, Severity.WARNING)):
        shm_facts = replace(
            facts.shm,
            total=Fact.known(64 * mib),
            used=Fact.known(used),
            free=Fact.known(64 * mib - used),
            fstype=Fact.known("tmpfs"),
        )
        report = diagnose(replace(facts, shm=shm_facts))
        (f,) = [f for f in report.findings if f.code == "ENV011"]
        assert f.severity is severity
    assert f.message.startswith("1 zero-block torch_* file")  # 32 MiB free: room for 24 MiB
    near = diagnose(replace(facts, shm=replace(shm_facts, used=Fact.known(48 * mib))))
    (g,) = [f for f in near.findings if f.code == "ENV011"]
    assert g.message == (
        "likely stalled: DataLoader blocked on /dev/shm: 48 MiB of 64 MiB used (16 MiB free, "
        "less than one failed request) and 1 zero-block torch_* file in /dev/shm "
        "(e.g. torch_77_123_0; largest request 24 MiB): failed allocations"
    )

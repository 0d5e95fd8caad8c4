"""ENV002 `shm-free-below-require` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import DoctorOptions, diagnose
from shmguard.model import Severity
from shmguard.units import GiB, format_iec


def test_env002_require_sizes_the_fix_from_used_plus_required(host):
    facts = host("k8s-v2-sized-full")
    report = diagnose(facts, DoctorOptions(require=GiB))
    assert [f.code for f in report.findings] == ["ENV002", "ENV003"]  # errors first
    f = report.findings[0]
    assert f.severity is Severity.ERROR
    assert f.message == "/dev/shm has 102 MiB free, below the 1 GiB required (--require)"
    assert f.fix is not None
    assert f.fix.description.startswith(
        "Give /dev/shm what it holds now plus --require, with 25% headroom: 4 GiB"
    )
    (k8s,) = fix_snippets(f.fix)
    # (1946 MiB used + 1024 MiB required) x 1.25 headroom = 3712.5 MiB, rounded up to 4 GiB.
    assert "sizeLimit: 4Gi" in k8s.text
    # The room beside the 2 GiB /dev/shm (6 GiB) + 4 GiB = 10 GiB.
    assert "memory: 10Gi" in k8s.text
    assert diagnose(facts, DoctorOptions(require=100 << 20)).findings[0].code == "ENV003"
    # More than the machine's RAM can never be met: the message says so.
    ram = facts.memory.total.value
    assert ram is not None
    huge = diagnose(facts, DoctorOptions(require=ram + GiB)).findings[0]
    assert huge.message.endswith(
        f"required (--require); that is more than this machine's {format_iec(ram)} of RAM, "
        "which every tmpfs page comes out of"
    )

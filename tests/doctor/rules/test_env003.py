"""ENV003 `shm-usage-high` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import DoctorOptions, diagnose


def test_env003_usage_names_the_percentage(host):
    (f,) = diagnose(host("k8s-v2-sized-full")).findings
    assert f.message == "/dev/shm is 95% full: ~1.9 GiB of 2 GiB"
    assert f.fix is not None and "sizeLimit: 4Gi" in fix_snippets(f.fix)[0].text
    assert diagnose(host("k8s-v2-sized-full"), DoctorOptions(usage_threshold=0.96)).findings == ()

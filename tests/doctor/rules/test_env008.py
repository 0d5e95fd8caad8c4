"""ENV008 `shm-missing` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.lint.doctor import diagnose
from shmguard.model import Severity


def test_env008_without_dev_shm(host):
    (missing,) = diagnose(host("docker-ipc-none")).findings
    assert (missing.code, missing.severity) == ("ENV008", Severity.ERROR)

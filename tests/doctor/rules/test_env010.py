"""ENV010 `shm-unsized-tmpfs` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from dataclasses import replace

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import diagnose
from shmguard.model import Severity
from shmguard.model.host import RuntimeFacts


def test_env010_on_v1_host_ipc(host):
    by_code = {f.code: f for f in diagnose(host("docker-v1-ipc-host")).findings}
    assert by_code["ENV010"].message.startswith("/dev/shm is a tmpfs mounted without size=")
    assert by_code["ENV010"].severity is Severity.WARNING


def test_env010_is_info_on_a_bare_host(host):
    facts = host("docker-v1-ipc-host")
    bare = replace(facts, runtime=RuntimeFacts("none", ()))
    (f,) = [f for f in diagnose(bare).findings if f.code == "ENV010"]
    assert f.severity is Severity.INFO
    assert f.fix is not None and "mount -o remount,size=1024m /dev/shm" in f.fix.description
    assert [s.runtime for s in fix_snippets(f.fix)] == [
        "docker",
        "compose",
        "kubernetes",
        "podman",
        "ecs",
    ]

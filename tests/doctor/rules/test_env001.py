"""ENV001 `runtime-default-shm-size` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import diagnose
from shmguard.model import Severity


def test_env001_message_and_fix_for_docker(host):
    (f,) = diagnose(host("docker-v2-default")).findings
    assert (f.code, f.name, f.severity) == ("ENV001", "runtime-default-shm-size", Severity.WARNING)
    assert f.message == (
        "/dev/shm is 64 MiB (67108864 bytes): the size equals the default of docker, containerd, "
        "cri-o"
    )
    assert f.location is not None and f.location.file == "/dev/shm"
    assert f.fix is not None
    assert [s.runtime for s in fix_snippets(f.fix)] == ["docker", "compose", "ecs"]
    # 1 GiB default: the 8 GiB limit keeps the room the job had beside 64 MiB of shm (8 GiB -
    # 64 MiB) and gains 1 GiB: 9 GiB - 64 MiB, rounded up by the sizing policy to 9 GiB.
    assert fix_snippets(f.fix)[0].text == "docker run --shm-size=1g --memory=9g IMAGE ..."
    assert "raise the memory limit to 9 GiB" in f.fix.description
    assert "shmguard measure" in f.fix.description


def test_env001_podman_fix_is_podman_only(host):
    (f,) = diagnose(host("podman-v2-default")).findings
    assert "default of podman" in f.message and "65536000 bytes" in f.message
    assert f.fix is not None
    assert [(s.runtime, s.text) for s in fix_snippets(f.fix)] == [
        ("podman", "podman run --shm-size=1g IMAGE ...")
    ]

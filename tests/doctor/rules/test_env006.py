"""ENV006 `nofile-low` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.lint.doctor import diagnose


def test_env006_on_v1_host_ipc(host):
    by_code = {f.code: f for f in diagnose(host("docker-v1-ipc-host")).findings}
    assert by_code["ENV006"].message == (
        "the open-file limit is 1024 (soft) / 1024 (hard); below 4096"
    )
    assert by_code["ENV006"].fix is not None
    assert by_code["ENV006"].fix.description == (
        "Raise it: docker run --ulimit nofile=65536:65536 (Compose: ulimits: nofile: 65536); "
        "or torch.multiprocessing.set_sharing_strategy('file_system')."
    )

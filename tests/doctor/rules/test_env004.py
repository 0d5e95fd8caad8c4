"""ENV004 `shm-exceeds-memory-limit` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import diagnose


def test_env004_on_v1_host_ipc(host):
    by_code = {f.code: f for f in diagnose(host("docker-v1-ipc-host")).findings}
    assert by_code["ENV004"].message == (
        "/dev/shm (~31.39 GiB) is larger than the memory limit (4 GiB)"
    )
    fix4 = by_code["ENV004"].fix
    assert fix4 is not None
    assert fix_snippets(fix4)[0].text == "docker run --shm-size=1g --memory=4g IMAGE ..."
    assert "--ipc=private" in fix4.description

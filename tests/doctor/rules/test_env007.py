"""ENV007 `oom-kills-recorded` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.lint.doctor import diagnose


def test_env007_on_kubernetes_unsized_emptydir(host):
    by_code = {f.code: f for f in diagnose(host("k8s-v2-unsized-emptydir")).findings}
    assert by_code["ENV007"].message == "the memory cgroup has recorded 2 OOM kills"

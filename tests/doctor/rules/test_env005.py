"""ENV005 `memory-margin-low` over the host fixture trees (tests/fixtures/hosts):
its messages, severities and fixes."""

from __future__ import annotations

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import diagnose


def test_env005_on_kubernetes_unsized_emptydir(host):
    by_code = {f.code: f for f in diagnose(host("k8s-v2-unsized-emptydir")).findings}
    assert by_code["ENV005"].message == (
        "the memory limit (16 GiB) leaves 0 B beside a full /dev/shm (16 GiB); less than 1 GiB"
    )
    (k8s,) = fix_snippets(by_code["ENV005"].fix)  # type: ignore[union-attr]
    assert "memory: 32Gi" in k8s.text and "sizeLimit: 16Gi" in k8s.text

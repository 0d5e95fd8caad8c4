"""SHM003 `docker-suffix-in-quantity`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm003_doc_example() -> None:
    ((severity, line, column, applies, message),) = in_doc_example("SHM003")
    assert (severity, line, column, applies) == ("error", 14, 45, "safe")
    assert message.startswith(
        "emptyDir.sizeLimit: '2g' is Docker syntax, not a Kubernetes quantity"
    )
    assert message.endswith("; write 2Gi")


def test_shm003_reads_memory_limits_too() -> None:
    ((severity, line, _, applies, message),) = found(
        pod("      resources: {limits: {memory: 8GB}}\n"), "pod.yaml", "SHM003"
    )
    assert (severity, line, applies) == ("error", 10, "safe")
    assert message.startswith("resources.limits.memory: '8GB' is Docker syntax")


def test_shm003_leaves_placeholders_alone() -> None:
    src = pod(volume='{medium: Memory, sizeLimit: "${SIZE}"}')
    assert found(src, "pod.yaml", "SHM003") == []

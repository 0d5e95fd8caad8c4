"""SHM008 `unbounded-memory-emptydir`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm008_doc_example_is_an_unsafe_fix() -> None:
    ((severity, line, column, applies, message),) = in_doc_example("SHM008")
    assert (severity, line, column, applies) == ("warning", 13, 26, "unsafe")
    assert message == (
        "volume 'dshm' (medium: Memory, at /dev/shm in 'train') has no sizeLimit and the "
        "container has no memory limit: the tmpfs is bounded only by node memory"
    )


def test_shm008_not_when_the_container_has_a_memory_limit() -> None:
    src = pod("      resources: {limits: {memory: 8Gi}}\n", volume="{medium: Memory}")
    assert found(src, "pod.yaml", "SHM008") == []

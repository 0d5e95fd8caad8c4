"""SHM006 `emptydir-medium-not-memory`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm006_doc_example_is_a_safe_fix() -> None:
    ((severity, line, column, applies, message),) = in_doc_example("SHM006")
    assert (severity, line, column, applies) == ("error", 13, 26, "safe")
    assert "emptyDir medium 'memory' is not a storage medium the kubelet knows" in message


def test_shm006_another_word_for_memory_is_an_unsafe_fix() -> None:
    for medium in ("tmpfs", "RAM"):
        src = pod(volume=f"{{medium: {medium}, sizeLimit: 1Gi}}")
        ((severity, _, _, applies, message),) = found(src, "pod.yaml", "SHM006")
        assert (severity, applies) == ("error", "unsafe"), medium
        assert f"emptyDir medium {medium!r}" in message


def test_shm006_hugepages_are_a_medium() -> None:
    src = pod(volume="{medium: HugePages-2Mi, sizeLimit: 1Gi}")
    assert found(src, "pod.yaml", "SHM006") == []

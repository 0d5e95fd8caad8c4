"""SHM004 `milli-memory-quantity`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm004_doc_example() -> None:
    assert in_doc_example("SHM004") == [
        (
            "error",
            15,
            20,
            "safe",
            "emptyDir.sizeLimit: '512m' is 512 millibytes (0.512 bytes), not mebibytes; "
            "write 512Mi",
        )
    ]


def test_shm004_reads_memory_requests() -> None:
    ((severity, line, _, applies, message),) = found(
        pod("      resources: {requests: {memory: 512m}}\n"), "pod.yaml", "SHM004"
    )
    assert (severity, line, applies) == ("error", 10, "safe")
    assert message.startswith("resources.requests.memory: '512m' is 512 millibytes")


def test_shm004_not_for_mega() -> None:
    src = pod(volume="{medium: Memory, sizeLimit: 64M}")
    assert found(src, "pod.yaml", "SHM004") == []

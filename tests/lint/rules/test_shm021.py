"""SHM021 `tmpfs-size-syntax`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm021_doc_example() -> None:
    assert in_doc_example("SHM021") == [
        (
            "error",
            2,
            12,
            "safe",
            "--tmpfs /dev/shm size '8gb': the kernel rejects it and the container does not start",
        )
    ]


def test_shm021_compose_kubernetes_suffix_and_a_fraction() -> None:
    src = 'services:\n  a:\n    image: pytorch/pytorch\n    tmpfs: ["/dev/shm:size=8Gi"]\n'
    ((severity, line, column, applies, _),) = found(src, "compose.yaml", "SHM021")
    assert (severity, line, column, applies) == ("error", 4, 13, "safe")
    fraction = "docker run --tmpfs /dev/shm:size=1.5g pytorch/pytorch python t.py\n"
    ((_, _, _, _, message),) = found(fraction, "run.sh", "SHM021")
    assert "size '1.5g': the kernel rejects it" in message

"""SHM002 `kubernetes-suffix-in-docker-size`: its documented example at its exact place, and its own
cases (the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm002_doc_example() -> None:
    assert in_doc_example("SHM002") == [
        (
            "error",
            5,
            15,
            "safe",
            "shm_size: '2Gi' has a Kubernetes suffix: Compose v2 (compose-go) and Docker CLI 23+ "
            "reject it (invalid suffix: 'gi'), Compose v1 stops with a traceback; write 2g",
        )
    ]


def test_shm002_is_info_on_podman_which_reads_the_suffix() -> None:
    ((severity, line, column, applies, message),) = found(
        "podman run --shm-size=2Gi pytorch/pytorch python t.py\n", "run.sh", "SHM002"
    )
    assert (severity, line, column, applies) == ("info", 1, 12, "safe")
    assert message.startswith("--shm-size 2Gi: Podman 4.x reads the Kubernetes suffix as binary")


def test_shm002_reads_memory_flags_and_accepts_gib() -> None:
    ((severity, _, column, _, message),) = found(
        "docker run --shm-size=2g --memory=8Gi pytorch/pytorch python t.py\n", "run.sh", "SHM002"
    )
    assert (severity, column) == ("error", 26) and message.endswith("write 8g")
    gib = "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 2GiB\n"
    assert found(gib, "compose.yaml", "SHM002") == []

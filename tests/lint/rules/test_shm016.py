"""SHM016 `zero-shm-size`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm016_doc_example_podman_is_unlimited() -> None:
    assert in_doc_example("SHM016") == [
        (
            "warning",
            2,
            12,
            None,
            "--shm-size=0: Podman 4.3 gives /dev/shm no limit (bounded only by memory) "
            "(target Podman 4.3)",
        )
    ]


def test_shm016_docker_gives_its_default() -> None:
    src = "docker run --shm-size=0 pytorch/pytorch python t.py\n"
    ((_, _, _, _, message),) = found(src, "run.sh", "SHM016")
    assert "docker CLI 28 gives /dev/shm the runtime's default (64 MiB" in message


def test_shm016_kernel_tmpfs_size_zero() -> None:
    src = 'services:\n  a:\n    image: pytorch/pytorch\n    tmpfs: ["/dev/shm:size=0"]\n'
    assert found(src, "compose.yaml", "SHM016") == [
        ("warning", 4, 13, None, "tmpfs at /dev/shm with size=0: the kernel sets no limit")
    ]

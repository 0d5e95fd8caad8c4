"""SHM009 `size-limit-above-memory-limit`: its documented example at its exact place, and its own
cases (the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm009_doc_example() -> None:
    assert in_doc_example("SHM009") == [
        (
            "warning",
            14,
            45,
            None,
            "volume 'dshm': sizeLimit 16Gi (16 GiB) is above the memory limit of container "
            "'train' (4 GiB): shm pages are charged to that limit, so the container is OOM-killed "
            "first",
        )
    ]


def test_shm009_not_at_the_limit_nor_for_a_volume_not_at_dev_shm() -> None:
    limit = "      resources: {limits: {memory: 4Gi}}\n"
    equal = pod(limit, volume="{medium: Memory, sizeLimit: 4Gi}")
    assert found(equal, "pod.yaml", "SHM009") == []
    elsewhere = pod(limit, volume="{medium: Memory, sizeLimit: 5Gi}", mounted=False)
    assert found(elsewhere, "pod.yaml", "SHM009") == []

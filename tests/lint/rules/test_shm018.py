"""SHM018 `mem-limit-differs-from-deploy`: its documented example at its exact place, and its own
cases (the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm018_doc_example() -> None:
    assert in_doc_example("SHM018") == [
        (
            "error",
            6,
            16,
            None,
            "mem_limit 8g and deploy.resources.limits.memory 16g differ: Compose v2 refuses the "
            "file (can't set distinct values) (target Compose v2)",
        )
    ]


def test_shm018_equal_bytes_in_other_spellings_are_fine() -> None:
    src = (
        "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 2g\n    mem_limit: 1g\n"
        "    deploy: {resources: {limits: {memory: 1024m}}}\n"
    )
    assert found(src, "compose.yaml", "SHM018") == []

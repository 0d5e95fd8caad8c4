"""SHM014 `compose-float-size`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example

from shmguard.lint.check import CheckOptions
from shmguard.model.target import Target

FLOAT = "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 1.5e9\n"


def test_shm014_doc_example() -> None:
    ((severity, line, column, applies, message),) = in_doc_example("SHM014")
    assert (severity, line, column, applies) == ("error", 5, 15, "safe")
    assert message.endswith(
        "Compose v2 drops it and the 64 MiB default applies (target Compose v2)"
    )


def test_shm014_not_for_compose_v1_whose_yaml_reads_a_string() -> None:
    v1 = CheckOptions(target=Target(compose="v1"))
    assert found(FLOAT, "compose.yaml", "SHM014", v1) == []


def test_shm014_a_unitless_fraction_is_one_byte() -> None:
    src = FLOAT.replace("1.5e9", '"1.5"')
    ((severity, line, _, _, message),) = found(src, "compose.yaml", "SHM014")
    assert (severity, line) == ("error", 4)
    assert "is a unitless fraction: Compose v2 applies 1 byte" in message

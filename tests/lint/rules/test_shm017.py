"""SHM017 `deploy-memory-integer`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example

from shmguard.lint.check import CheckOptions
from shmguard.model.target import Target

SERVICE = "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 2g\n"


def test_shm017_doc_example() -> None:
    ((severity, line, column, applies, message),) = in_doc_example("SHM017")
    assert (severity, line, column, applies) == ("error", 6, 43, "safe")
    assert "17179869184 is an integer: Compose v2 refuses the file" in message


def test_shm017_reservations_too() -> None:
    src = SERVICE + "    deploy: {resources: {reservations: {memory: 1073741824}}}\n"
    ((_, line, column, _, message),) = found(src, "compose.yaml", "SHM017")
    assert (line, column) == (5, 49)
    assert message.startswith("deploy.resources.reservations.memory: 1073741824 is an integer")


def test_shm017_says_podman_compose_passes_it_on() -> None:
    src = SERVICE + "    deploy: {resources: {limits: {memory: 17179869184}}}\n"
    options = CheckOptions(target=Target(compose="podman-compose"))
    ((_, _, _, _, message),) = found(src, "compose.yaml", "SHM017", options)
    assert "podman-compose passes it on (it has no schema)" in message

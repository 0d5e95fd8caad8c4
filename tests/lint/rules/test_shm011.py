"""SHM011 `shm-size-ignored-by-ipc`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example


def test_shm011_doc_example() -> None:
    assert in_doc_example("SHM011") == [
        (
            "warning",
            2,
            23,
            None,
            "--shm-size is ignored with --ipc=host: the host's /dev/shm is used",
        )
    ]


def test_shm011_is_an_error_where_podman_refuses_the_pair() -> None:
    src = "podman run --ipc=host --shm-size=16g vllm/vllm-openai\n"
    ((severity, _, _, _, message),) = found(src, "run.sh", "SHM011")
    assert severity == "error"
    assert "'cannot set shmsize when running in the {host } IPC Namespace'" in message


def test_shm011_compose_names_what_each_tool_does() -> None:
    src = "services:\n  a:\n    image: vllm/vllm-openai\n    ipc: host\n    shm_size: 16g\n"
    ((severity, line, column, _, message),) = found(src, "compose.yaml", "SHM011")
    assert (severity, line, column) == ("warning", 5, 15)
    assert "podman-compose instead ignores ipc and applies shm_size" in message

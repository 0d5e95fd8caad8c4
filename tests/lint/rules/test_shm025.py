"""SHM025 `shm-remount`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod

REMOUNT = "mount -o remount,size=8G /dev/shm && python t.py"


def test_shm025_doc_example_is_privileged() -> None:
    assert in_doc_example("SHM025") == [
        (
            "warning",
            9,
            16,
            None,
            "remounts /dev/shm from inside the container, with privileged or SYS_ADMIN",
        )
    ]


def test_shm025_without_privilege_it_fails() -> None:
    src = pod(f'      command: ["sh", "-c", "{REMOUNT}"]\n')
    ((_, line, _, _, message),) = found(src, "pod.yaml", "SHM025")
    assert line == 10
    assert (
        message == "remounts /dev/shm from inside the container: fails without privileged/SYS_ADMIN"
    )


def test_shm025_compose_command_with_sys_admin() -> None:
    src = (
        "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 1g\n"
        f"    cap_add: [SYS_ADMIN]\n    command: sh -c '{REMOUNT}'\n"
    )
    ((_, line, column, _, message),) = found(src, "compose.yaml", "SHM025")
    assert (line, column) == (6, 14) and message.endswith("with privileged or SYS_ADMIN")

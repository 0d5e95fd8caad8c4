"""SHM023 `host-shm-shared`: its documented example at its exact place, and its own cases
(the bad and good examples themselves run in tests/lint/test_rule_examples.py)."""

from __future__ import annotations

from _rule_helpers import found, in_doc_example, pod


def test_shm023_doc_example() -> None:
    assert in_doc_example("SHM023") == [
        (
            "warning",
            6,
            12,
            None,
            "hostIPC: true shares the host's IPC namespace and /dev/shm with this pod",
        )
    ]


def test_shm023_host_path_and_compose_bind() -> None:
    src = pod(volume="hostPath: {path: /dev/shm}")
    assert found(src, "pod.yaml", "SHM023") == [
        ("warning", 12, 24, None, "volume 'dshm' is the host's /dev/shm (hostPath)")
    ]
    bind = "services:\n  a:\n    image: pytorch/pytorch\n    shm_size: 1g\n"
    bind += "    volumes: [/dev/shm:/dev/shm]\n"
    ((_, line, _, _, message),) = found(bind, "compose.yaml", "SHM023")
    assert line == 5 and message == "the host's /dev/shm is bind-mounted at /dev/shm"


def test_shm023_not_for_an_agent_pod_nor_ipc_host() -> None:
    plugin = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plugin}\nspec:\n  hostIPC: true\n"
        "  containers:\n    - name: plugin\n      image: nvcr.io/nvidia/k8s-device-plugin:v0.14.0\n"
    )
    assert found(plugin, "pod.yaml", "SHM023") == []
    assert found("docker run --ipc=host pytorch/pytorch python t.py\n", "run.sh", "SHM023") == []

"""The arguments as evidence, alike in ``check`` and the webhook (issue 21 item 3): a
single-GPU PyTorch container whose command line starts no DataLoader worker gets SHM001 at
info only from check, and the webhook leaves its pod alone for the same reason; one more
worker or one more GPU and both ask for a /dev/shm."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from webhook_helpers import review

from shmguard.fleet.admission import decide_admission
from shmguard.lint.check import check_loaded
from shmguard.sources.load import load_bytes


def pod(args: list[str], gpus: object) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train"},
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "pytorch/pytorch:2.3.0",
                    "command": ["python", "train.py", *args],
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ]
        },
    }


def check_shm001(obj: dict[str, Any]) -> list[tuple[str, bool]]:
    data = yaml.safe_dump(obj, sort_keys=False).encode()
    result = check_loaded(load_bytes(data, "pod.yaml"))
    shm001 = [f for f in result.findings if f.code == "SHM001"]
    return [(f.severity.value, "info only" in f.message) for f in shm001]


@pytest.mark.parametrize(
    ("args", "gpus", "quiet"),
    [
        (["--workers=0"], 1, True),
        (["--num_workers", "0"], "1", True),
        (["dataloader.num_workers=0"], 1, True),
        (["--workers=4"], 1, False),
        (["--workers=0"], 2, False),
        (["--workers=0"], "²", False),  # not a count either of them reads as one GPU
        ([], 1, False),
    ],
)
def test_check_and_the_webhook_read_the_arguments_alike(
    args: list[str], gpus: object, quiet: bool
) -> None:
    obj = pod(args, gpus)
    found = check_shm001(obj)
    d = decide_admission(review(obj))
    if quiet:
        assert found == [("info", True)]
        assert (d.action, d.reason) == ("skip", "no-shm-need")
        assert "starts no DataLoader worker and one GPU" in d.message
        assert all(op["path"].startswith("/metadata") for op in d.patch)
    else:
        assert found == [("warning", False)]
        assert d.action == "inject"

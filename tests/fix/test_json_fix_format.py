"""`check --fix` on a JSON manifest writes its additions formatted like the document (issue 21:
a line used to start with `, "volumeMounts": [...]}`): pretty-printed at the file's indentation
step, one-line items in a list of one-line items, and JSON that still parses."""

from __future__ import annotations

import json

from shmguard.lint.check import fix_file

# The shape `kubectl create deployment train --image=... --dry-run=client -o json` prints
# (4-space indentation, one key per line), with the container's command added.
DEPLOYMENT = b"""{
    "kind": "Deployment",
    "apiVersion": "apps/v1",
    "metadata": {
        "name": "train",
        "creationTimestamp": null,
        "labels": {
            "app": "train"
        }
    },
    "spec": {
        "replicas": 1,
        "selector": {
            "matchLabels": {
                "app": "train"
            }
        },
        "template": {
            "metadata": {
                "creationTimestamp": null,
                "labels": {
                    "app": "train"
                }
            },
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                        "command": ["torchrun", "--nproc-per-node", "8", "train.py"],
                        "resources": {}
                    }
                ]
            }
        },
        "strategy": {}
    },
    "status": {}
}
"""


def test_pretty_printed_json_gets_pretty_printed_entries() -> None:
    r = fix_file(DEPLOYMENT, "deployment.json")
    assert [f.code for f in r.applied] == ["SHM001"]
    mount = b"""                        "resources": {},
                        "volumeMounts": [
                            {
                                "name": "dshm",
                                "mountPath": "/dev/shm"
                            }
                        ]
                    }
                ],
                "volumes": [
                    {
                        "name": "dshm",
                        "emptyDir": {
                            "medium": "Memory",
                            "sizeLimit": "1Gi"
                        }
                    }
                ]
            }
"""
    assert mount in r.data
    assert b"\n," not in r.data and b"\n ," not in r.data
    doc = json.loads(r.data)
    spec = doc["spec"]["template"]["spec"]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    ]
    assert fix_file(r.data, "deployment.json").applied == ()  # idempotent


def test_a_list_of_one_line_items_takes_one_more_one_line_item() -> None:
    src = b"""{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "train"},
  "spec": {
    "containers": [
      {
        "name": "train",
        "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "command": ["torchrun", "train.py"],
        "volumeMounts": [
          {"name": "data", "mountPath": "/data"}
        ]
      }
    ],
    "volumes": [
      {"name": "data", "emptyDir": {}}
    ]
  }
}
"""
    r = fix_file(src, "pod.json")
    assert r.data == src.replace(
        b'{"name": "data", "mountPath": "/data"}\n',
        b'{"name": "data", "mountPath": "/data"},\n'
        b'          {"name": "dshm", "mountPath": "/dev/shm"}\n',
    ).replace(
        b'{"name": "data", "emptyDir": {}}\n',
        b'{"name": "data", "emptyDir": {}},\n'
        b'      {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}\n',
    )
    json.loads(r.data)


def test_one_line_json_and_yaml_flow_mappings_keep_the_inline_form() -> None:
    src = (
        b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"}, "spec": {"containers": '
        b'[{"name": "t", "image": "pytorch/pytorch", "command": ["torchrun", "train.py"]}]}}\n'
    )
    r = fix_file(src, "pod.json")
    assert b"\n" not in r.data.rstrip(b"\n")
    assert json.loads(r.data)["spec"]["volumes"][0]["name"] == "dshm"


def test_a_multi_line_yaml_flow_list_with_a_comment_after_its_last_item() -> None:
    import yaml

    src = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: t}\nspec:\n  containers:\n    - name: t\n"
        b"      image: pytorch/pytorch\n      command: [torchrun, train.py]\n"
        b"      volumeMounts: [\n        {name: data, mountPath: /data}  # datasets\n      ]\n"
        b"  volumes: [\n    {name: data, emptyDir: {}}\n  ]\n"
    )
    r = fix_file(src, "pod.yaml")
    # the new entry goes after the last one's own text, so the comment cannot swallow a comma
    assert b"{name: data, mountPath: /data},\n        {name: dshm, mountPath: /dev/shm}" in r.data
    assert yaml.safe_load(r.data)["spec"]["volumes"][1]["name"] == "dshm"
    assert fix_file(r.data, "pod.yaml").applied == ()

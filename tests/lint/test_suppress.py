"""Inline suppressions (``# shmguard: ignore[...]``) and the ``shmguard.io/ignore`` annotation
and label: which findings they remove, and that ``--fix`` leaves suppressed findings alone."""

from __future__ import annotations

from shmguard.lint.check import check_loaded, fix_file
from shmguard.lint.suppress import ALL, scan
from shmguard.sources.load import load_bytes


def codes(text: str, name: str = "compose.yaml") -> list[tuple[str, int | None]]:
    result = check_loaded(load_bytes(text.encode(), name))
    return [(f.code, f.location.line if f.location else None) for f in result.findings]


COMPOSE = """\
services:
  train:
    image: pytorch/pytorch:2.3.0
  serve:
    image: nginx
    shm_size: 2Gi
"""


def test_unsuppressed_baseline_of_the_examples() -> None:
    assert codes(COMPOSE) == [("SHM001", 2), ("SHM002", 6)]


def test_scan_lines_codes_and_bare() -> None:
    s = scan(
        "a: 1  # shmguard: ignore[SHM001, shm011]\n"
        "# shmguard: ignore\n"
        "# a reason on the next comment line\n"
        "b: 2\n"
        "<!-- shmguard: ignore[SHM0] -->\n"
        "docker run x\n"
        "c: 3  # shmguard: ignore[]\n"
        "d: 4  # shmguard:ignore[SHM002]\n"
    )
    assert dict(s.by_line) == {
        1: ("SHM001", "SHM011"),
        2: ALL,
        4: ALL,
        5: ("SHM0",),
        6: ("SHM0",),
        8: ("SHM002",),
    }
    # a trailing comment does not reach the next line
    assert 2 not in scan("a: 1  # shmguard: ignore\nb: 2\n").by_line


def test_same_line_suppresses_only_the_named_code() -> None:
    text = COMPOSE.replace("  train:\n", "  train:  # shmguard: ignore[SHM001]\n")
    assert codes(text) == [("SHM002", 6)]
    text = COMPOSE.replace("shm_size: 2Gi\n", "shm_size: 2Gi  # shmguard: ignore[SHM001]\n")
    assert codes(text) == [("SHM001", 2), ("SHM002", 6)]


def test_line_above_and_several_codes_and_bare() -> None:
    text = COMPOSE.replace("  train:\n", "  # shmguard: ignore[SHM001,SHM011]\n  train:\n")
    assert codes(text) == [("SHM002", 7)]
    text = COMPOSE.replace("    shm_size", "    # shmguard: ignore\n    shm_size")
    assert codes(text) == [("SHM001", 2)]
    # prefix, and a reason on the comment line below the suppression
    text = COMPOSE.replace(
        "  serve:\n    image: nginx\n",
        "  serve:\n    image: nginx\n    # shmguard: ignore[SHM]\n    # Kubernetes size kept\n",
    )
    assert codes(text) == [("SHM001", 2)]
    # two lines above (a non-comment line between) does not count
    text = COMPOSE.replace("  train:\n", "  # shmguard: ignore[SHM001]\n\n  train:\n")
    assert codes(text) == [("SHM001", 4), ("SHM002", 8)]


def test_shell_run_lines_and_continuations() -> None:
    script = (
        "#!/bin/sh\n"
        "docker run --gpus all pytorch/pytorch:2.3.0 python t.py  # shmguard: ignore[SHM001]\n"
        "# shmguard: ignore[SHM011]\n"
        "docker run --gpus all \\\n"
        "  --ipc=host \\\n"
        "  --shm-size=8g pytorch/pytorch:2.3.0\n"
        "docker run --shm-size=2Gi nginx\n"
    )
    # the SHM011 finding is on line 6, inside the command that starts on line 4
    assert codes(script, "run.sh") == [("SHM002", 7)]
    unsuppressed = script.replace("# shmguard: ignore[SHM011]", "# comment")
    assert codes(unsuppressed, "run.sh") == [("SHM011", 6), ("SHM002", 7)]


def test_markdown_code_block_and_html_comment() -> None:
    md = (
        "# Train\n\n"
        "```sh\n"
        "# shmguard: ignore[SHM001]\n"
        "docker run --gpus all pytorch/pytorch:2.3.0 python t.py\n"
        "```\n\n"
        "<!-- shmguard: ignore[SHM002] -->\n"
        "```\n"
        "docker run --shm-size=2Gi nginx\n"
        "```\n"
        "Inline code in prose is not read (issue 21): `docker run --shm-size=2Gi nginx`.\n"
    )
    assert codes(md, "README.md") == []
    assert codes(md.replace("shmguard: ignore", "note"), "README.md") == [
        ("SHM001", 5),
        ("SHM002", 10),
    ]


POD = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  annotations:
    shmguard.io/ignore: "SHM008, shm023"
spec:
  template:
    spec:
      hostIPC: true
      containers:
        - name: t
          image: pytorch/pytorch:2.3.0
          volumeMounts: [{name: dshm, mountPath: /dev/shm}]
      volumes:
        - name: dshm
          emptyDir: {medium: Memory}
        - name: cache
          emptyDir: {medium: memory}
"""


def test_kubernetes_annotation_on_the_object_and_on_the_template() -> None:
    assert codes(POD, "job.yaml") == [("SHM006", 19)]
    bare = POD.replace('  annotations:\n    shmguard.io/ignore: "SHM008, shm023"\n', "")
    assert sorted(codes(bare, "job.yaml")) == [("SHM006", 17), ("SHM008", 15), ("SHM023", 8)]
    on_template = bare.replace(
        "  template:\n    spec:\n",
        "  template:\n    metadata:\n      annotations:\n"
        '        shmguard.io/ignore: "SHM0"\n    spec:\n',
    )
    assert codes(on_template, "job.yaml") == []


def test_compose_label_map_and_list() -> None:
    text = COMPOSE.replace(
        "    image: nginx\n", '    image: nginx\n    labels:\n      shmguard.io/ignore: "SHM002"\n'
    )
    assert codes(text) == [("SHM001", 2)]
    text = COMPOSE.replace(
        "    image: pytorch/pytorch:2.3.0\n",
        "    image: pytorch/pytorch:2.3.0\n    labels:\n      - shmguard.io/ignore=SHM001\n",
    )
    assert codes(text) == [("SHM002", 8)]


def test_fix_leaves_suppressed_findings() -> None:
    text = COMPOSE.replace("  train:\n", "  train:  # shmguard: ignore[SHM001]\n")
    fr = fix_file(text.encode(), "compose.yaml")
    assert [f.code for f in fr.applied] == ["SHM002"]
    assert fr.data.decode() == text.replace("shm_size: 2Gi", "shm_size: 2g")

"""A big multi-document Kubernetes stream is checked one document at a time
(:func:`shmguard.lint.check.check_stream`, issue 24 item 3: a 15 MB stream of 96k Pods held
1.9 GB whole): the same findings as the whole-file check, and the whole-file check whenever
the documents depend on each other. The memory itself is measured by
benchmarks/hostile_inputs.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmguard.lint.check import check_loaded, check_stream
from shmguard.render.json import to_data
from shmguard.sources import load
from shmguard.sources.load import load_bytes

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"

POD = """apiVersion: v1
kind: Pod
metadata:
  name: p-{i}
spec:
  containers:
  - name: c
    image: pytorch/pytorch:2.3.0  # shmguard: ignore[SHM010]
    resources: {{limits: {{memory: 8Gi}}}}
---
"""


def _stream_files() -> list[Path]:
    """Multi-document YAML files: the corpus's (when present) and the tests' fixtures."""
    roots = [CORPUS / "k8s", ROOT / "tests" / "fixtures"]
    found = []
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.y*ml")):
            if p.is_file() and b"\n---" in p.read_bytes():
                found.append(p)
    return found


def test_streamed_equals_whole_on_every_multi_document_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    files = _stream_files()
    assert len(files) > 20
    streamed = 0
    for p in files:
        data = p.read_bytes()
        got = check_stream(data, str(p))
        if got is None:
            continue
        streamed += 1
        assert got == check_loaded(load_bytes(data, str(p))), p
    assert streamed > 10  # most such files are plain object streams


#: Documents that cannot be checked apart from the others, each with why.
DEPENDENT = [
    (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: owned\n  ownerReferences:\n"
        "  - {kind: ReplicaSet, name: rs, controller: true}\nspec:\n  containers:\n"
        "  - {name: c, image: pytorch/pytorch:2.3.0}\n",
        "owner reference",
    ),
    (
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n"
        "metadata: {name: shmguard}\nwebhooks: []\n",
        "webhook configuration",
    ),
    (
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: shm}\nspec:\n"
        "  rules:\n  - name: r\n    mutate:\n      patchStrategicMerge:\n        spec:\n"
        "          volumes:\n          - name: dshm\n            emptyDir: {medium: Memory, "
        "sizeLimit: 64Mi}\n",
        "policy",
    ),
    ("services:\n  app: {image: pytorch/pytorch:2.3.0}\n", "compose"),
    ("a: [unclosed\n", "invalid YAML"),
]


@pytest.mark.parametrize(("extra", "why"), DEPENDENT)
def test_documents_that_depend_on_each_other_are_checked_whole(
    monkeypatch: pytest.MonkeyPatch, extra: str, why: str
) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    data = ("".join(POD.format(i=i) for i in range(3)) + extra).encode()
    assert check_stream(data, "s.yaml") is None, why


def test_small_files_and_single_documents_are_not_streamed() -> None:
    assert check_stream(POD.format(i=0).encode() * 2, "s.yaml") is None  # under the minimum
    big = b"# " + b"x" * load.STREAM_MIN_BYTES + b"\n" + POD.format(i=0).encode()[:-4]
    assert check_stream(big, "s.yaml") is None  # one document


def test_cli_on_a_big_stream_reports_what_the_whole_file_check_finds(tmp_path: Path) -> None:
    count = load.STREAM_MIN_BYTES // len(POD.format(i=0)) + 50
    path = tmp_path / "stream.yaml"
    path.write_text("".join(POD.format(i=i) for i in range(count)))
    data = path.read_bytes()
    assert check_stream(data, str(path)) is not None  # this file is streamed
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cmd = [sys.executable, "-m", "shmguard", "check", "--format", "json", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    whole = check_loaded(load_bytes(data, str(path)))
    assert len(whole.findings) == count  # one SHM001 a pod (SHM010 suppressed inline)
    assert report["files"][0]["findings"] == to_data(whole.findings)
    assert report["summary"]["warning"] == count

"""Every file of ../shared/corpus loads without a crash, with hand-checked counts for a sample.

The sample counts were checked by reading the files (service names under ``services:``,
replica types / groups / templates in the manifests, the words of each TSV command line).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from shmguard.sources.discover import discover
from shmguard.sources.load import load_path
from shmguard.sources.text import SourceText
from shmguard.sources.textsources import shell_run_lines

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)

# path -> (kind, service names or pod spec roles)
SAMPLE = {
    "compose/EleutherAI__gpt-neox/containers__docker__docker-compose.yml": (
        "compose",
        ["gpt-neox"],
    ),
    "compose/NVIDIA__GenerativeAIExamples/"
    "RAG__examples__basic_rag__langchain__docker-compose.yaml": (
        "compose",
        ["chain-server", "rag-playground"],
    ),
    "k8s/kubeflow__training-operator/examples__pytorch__simple.yaml": (
        "kubernetes",
        ["pytorchReplicaSpecs.Master", "pytorchReplicaSpecs.Worker"],
    ),
    "k8s/kubeflow__training-operator/examples__mpi__tensorflow-mnist.yaml": (
        "kubernetes",
        ["mpiReplicaSpecs.Launcher", "mpiReplicaSpecs.Worker"],
    ),
    "k8s/kubernetes-sigs__lws/docs__examples__vllm__GPU__lws.yaml": (
        "kubernetes",
        ["leaderWorkerTemplate.leaderTemplate", "leaderWorkerTemplate.workerTemplate"],
    ),
    "k8s/ray-project__kuberay/historyserver__test__testdata__raycluster.yaml": (
        "kubernetes",
        ["headGroupSpec", "workerGroupSpecs[0]"],
    ),
}


def test_every_corpus_file_loads() -> None:
    kinds: dict[str, int] = {}
    pods = services = 0
    for f in discover([str(CORPUS / "compose"), str(CORPUS / "k8s")]):
        lf = load_path(f)
        assert not lf.diagnostics, (f, lf.diagnostics)
        kinds[lf.kind] = kinds.get(lf.kind, 0) + 1
        pods += len(lf.pod_specs)
        services += sum(len(c.services) for c in lf.compose)
    # 1079 manifests; 240 Compose files + 1 with only `include:` (no services: plain YAML)
    assert kinds == {"kubernetes": 1079, "compose": 240, "yaml": 1}
    assert (services, pods) == (972, 908)


@pytest.mark.parametrize("rel", sorted(SAMPLE))
def test_hand_checked_sample(rel: str) -> None:
    kind, names = SAMPLE[rel]
    lf = load_path(str(CORPUS / rel))
    assert lf.kind == kind
    if kind == "compose":
        assert [s.name for c in lf.compose for s in c.services] == names
    else:
        assert [p.role for p in lf.pod_specs] == names


def _rows() -> list[dict[str, str]]:
    csv.field_size_limit(1 << 24)
    with (CORPUS / "docker_run_lines.tsv").open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_tsv_run_lines() -> None:
    rows = _rows()
    found = [list(shell_run_lines(SourceText.decode(r["command"].encode(), "t"))) for r in rows]  # type: ignore[arg-type]
    # 334 rows; the 19 without a run line are prose, commented-out commands or a command
    # held in a string (CMD="docker container run ..."), read by hand
    assert len(rows) == 334 and sum(1 for f in found if f) == 315
    first = found[0][0]  # verl docs/sglang_multiturn/search_tool_example.rst:21
    assert first.image is not None and first.image[0] == "lmsysorg/sglang:dev"
    assert [(f.name, f.value) for f in first.flags if f.name in ("--shm-size", "--ipc")] == [
        ("--shm-size", "32g"),
        ("--ipc", "host"),
    ]
    assert [w for w, _, _ in first.command] == ["/bin/zsh"]
    spin = found[2][0]  # `-e HF_TOKEN=<YOUR_HUGGINGFACE_TOKEN>` is a placeholder, not a redirect
    assert spin.image is not None and spin.image[0] == "lmsysorg/sglang:latest"

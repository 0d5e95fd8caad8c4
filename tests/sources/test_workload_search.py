"""Workload detection's fast searches find exactly what the case-insensitive patterns find."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from shmguard.model.finding import Location
from shmguard.sources import workload as w

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"

IMAGES = [
    "nvcr.io/nvidia/PyTorch:24.01-py3",
    "docker.io/library/postgres:15",
    "VLLM/vllm-openai:latest",
    "ghcr.io/huggingface/text-generation-inference:2.0",
    "rayproject/ray:2.9.0-gpu",
    "registry.example/İmage-torch:1",  # not ASCII: the re.I pattern is used
    "LLaMA-Factory:latest",
]
COMMANDS = [
    "TorchRun --nproc_per_node=8 train.py",
    "python manage.py runserver",
    "python3.11 -u -m torch.distributed.run train.py",
    "Accelerate   Launch train.py",
    "ray start --head",
    "xray start",
    "sh -c 'vllm serve model'",
    "text-generation-launcher --model-id x",
    "ſglang.launch_server",  # long s: re.I matches it as "s"
    "python -m torchvision",
]


def _reference(rx: object, s: str) -> str | None:
    assert hasattr(rx, "search")
    m = rx.search(s)
    return m.group(0) if m else None


def test_fast_searches_match_the_case_insensitive_patterns() -> None:
    for image in IMAGES:
        assert w._search_image(image) == _reference(w._IMAGE, image), image
    for cmd in COMMANDS:
        assert w._search_command(cmd) == _reference(w._COMMAND, cmd), cmd
    assert w._search_image(IMAGES[0]) == "nvcr.io/nvidia/PyTorch"
    assert w._search_command(COMMANDS[0]) == "TorchRun"
    assert w._search_command(COMMANDS[5]) is None
    assert w._search_command(COMMANDS[8]) == "ſglang.launch_server"


@pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
def test_fast_searches_over_the_corpus_run_lines() -> None:
    with (CORPUS / "docker_run_lines.tsv").open() as fh:
        commands = [row["command"] for row in csv.DictReader(fh, delimiter="\t")]
    hits = 0
    for cmd in commands:
        for word in cmd.split():
            assert w._search_image(word) == _reference(w._IMAGE, word), word
        assert w._search_command(cmd) == _reference(w._COMMAND, cmd), cmd
        hits += w._search_command(cmd) is not None
    assert hits > 0 or not commands


def test_locations_are_computed_only_for_evidence() -> None:
    calls: list[str] = []

    def at(name: str) -> Location:
        calls.append(name)
        return Location("f.yaml", line=len(calls))

    wl = w.classify(
        images=[("postgres:15", lambda: at("postgres")), ("pytorch/pytorch", lambda: at("pt"))],
        env=[("HOME", lambda: at("HOME")), ("NCCL_DEBUG", lambda: at("NCCL"))],
        annotations={"shmguard.io/workload": ("ml", lambda: at("ann"))},
    )
    assert calls == ["pt", "NCCL", "ann"]
    assert [(e.kind, e.location) for e in wl.evidence] == [
        ("annotation", Location("f.yaml", line=3)),
        ("image", Location("f.yaml", line=1)),
        ("env", Location("f.yaml", line=2)),
    ]

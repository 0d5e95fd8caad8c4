"""The token matcher and the regular expressions compiled from the same token lists give one
answer: on every image and command of ../shared/corpus, on hand-picked references and on
random strings, in Python ``re`` and in RE2 (google-re2, the engine cel-python's ``matches``
uses, installed with it), as the generated policies run them."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmguard.lint.check import units
from shmguard.model.finding import Location
from shmguard.sources import workload as w
from shmguard.sources.discover import discover
from shmguard.sources.k8s_model import scalars
from shmguard.sources.load import load_path
from shmguard.sources.text import SourceText
from shmguard.sources.textsources import shell_run_lines
from shmguard.sources.tokenmatch import (
    COMMAND_PATTERN,
    IMAGE_PATTERN,
    ascii_lower,
    match_command,
    match_image,
)
from shmguard.sources.yamlnode import YScalar

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
_IMAGE = re.compile(IMAGE_PATTERN)
_COMMAND = re.compile(COMMAND_PATTERN)

IMAGES = [
    "nvcr.io/nvidia/PyTorch:24.01-py3",
    "docker.io/library/postgres:15",
    "VLLM/vllm-openai:latest",
    "ghcr.io/huggingface/text-generation-inference:2.0",
    "rayproject/ray:2.9.0-gpu",
    "docker.io/rayproject/ray-ml@sha256:0123",
    "rayproject:5000/ray",  # a registry named rayproject, not the namespace
    "registry.example/İmage-torch:1",  # not ASCII: only ASCII capitals are lowered
    "LLaMA-Factory:latest",
    "localhost:5000/torch",
    "torch.example.com/app",  # a registry is not matched
    "app:torch-2",  # nor a tag
    "horovod/horovod:0.20.0-tf2.3.0-torch1.6.0-mxnet1.5.0-py3.7-cpu",  # a versioned tag name
    "${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}",
    "<your-vllm-neuron-image>",
    "a/b:torch/c",  # a ":" inside a component: what follows it is not matched
    "nvcr.io/nvidia/dgl:24.07-py3",
    "ghcr.io/nvidia/dgl:24.07-py3",  # dgl counts on nvcr.io only
]
COMMANDS = [
    "TorchRun --nproc_per_node=8 train.py",
    "python manage.py runserver",
    "python3.11 -u -m torch.distributed.run train.py",
    "Accelerate   Launch train.py",
    "accelerate\tlaunch train.py",
    "ray start --head",
    "xray start",
    "sh -c 'vllm serve model'",
    "text-generation-launcher --model-id x",
    "python -m sglang.launch_server --model m",
    "python -m torchvision",
    "mytorchrun",
    "torchrun2",
    "python train.py --deepspeed ds.json",
]


def _regex_says(rx: re.Pattern[str], text: str) -> bool:
    return rx.search(ascii_lower(text)) is not None


def _re2_says(pattern: str, text: str) -> bool:
    re2 = pytest.importorskip("re2")
    return re2.search(pattern, ascii_lower(text)) is not None


def _agree(image: str | None = None, cmd: str | None = None) -> None:
    if image is not None:
        found = match_image(image) is not None
        assert found == _regex_says(_IMAGE, image) == _re2_says(IMAGE_PATTERN, image), image
    if cmd is not None:
        found = match_command(cmd) is not None
        assert found == _regex_says(_COMMAND, cmd) == _re2_says(COMMAND_PATTERN, cmd), cmd


def test_matcher_and_patterns_agree_on_hand_picked_text() -> None:
    for image in IMAGES:
        _agree(image=image)
    for cmd in COMMANDS:
        _agree(cmd=cmd)
    hits = {i: (m.text if (m := match_image(i)) else None) for i in IMAGES}
    assert hits["nvcr.io/nvidia/PyTorch:24.01-py3"] == "PyTorch"
    assert hits["docker.io/rayproject/ray-ml@sha256:0123"] == "rayproject/ray"
    assert hits["horovod/horovod:0.20.0-tf2.3.0-torch1.6.0-mxnet1.5.0-py3.7-cpu"] == "torch1.6.0"
    assert hits["nvcr.io/nvidia/dgl:24.07-py3"] == "nvcr.io/nvidia/dgl"
    for none in (
        "docker.io/library/postgres:15",
        "rayproject:5000/ray",
        "torch.example.com/app",
        "app:torch-2",
        "a/b:torch/c",
        "ghcr.io/nvidia/dgl:24.07-py3",
    ):
        assert hits[none] is None, none
    cmds = {c: (m.text if (m := match_command(c)) else None) for c in COMMANDS}
    assert cmds["TorchRun --nproc_per_node=8 train.py"] == "TorchRun"
    assert cmds["python3.11 -u -m torch.distributed.run train.py"] == "-m torch.distributed.run"
    assert cmds["Accelerate   Launch train.py"] == "Accelerate   Launch"
    assert cmds["python train.py --deepspeed ds.json"] == "deepspeed"
    for none in ("xray start", "python -m torchvision", "mytorchrun", "torchrun2"):
        assert cmds[none] is None, none


# fragments that make references: ML words and words that hold them, registries, separators
_FRAGMENTS = st.sampled_from(
    [
        *("torch", "PyTorch", "torch1", "pytorch", "vllm", "verl", "overleaf", "nemo", "mnemonic"),
        *("ray", "rayproject", "nvcr.io", "nvidia", "dgl", "llama", "factory", "text", "6", "x"),
        *("generation", "inference", "localhost", "io", "djl", "serving", "RAY", "0", "İ", "ſ"),
        *("/", "/", "/", ":", ":", "@", ".", "-", "_", "$", "{", "}", " ", "\t", "<", ">"),
    ]
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_FRAGMENTS, min_size=1, max_size=10))
def test_matcher_and_patterns_agree_on_random_text(parts: list[str]) -> None:
    text = "".join(parts)
    _agree(image=text, cmd=text)


def _corpus_text() -> Iterator[tuple[str, str]]:
    """("image" | "command", text) for every container of the corpus (Compose, Kubernetes,
    the run lines of docker_run_lines.tsv), as ``check`` reads them."""
    for f in discover([str(CORPUS / "compose"), str(CORPUS / "k8s")]):
        for unit in units(load_path(f)):
            if unit.service is not None:
                if isinstance(unit.service.image, YScalar):
                    yield "image", unit.service.image.value
                for key in ("command", "entrypoint"):
                    words = [s.value for s in scalars(unit.service.get(key))]
                    if words:
                        yield "command", " ".join(words)
            for c, _ in unit.containers:
                if isinstance(c.image, YScalar):
                    yield "image", c.image.value
                words = [s.value for s in (*scalars(c.command), *scalars(c.args))]
                if words:
                    yield "command", " ".join(words)
    csv.field_size_limit(1 << 24)
    with (CORPUS / "docker_run_lines.tsv").open(newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            src = SourceText.decode(row["command"].encode(), "run.sh")
            assert not isinstance(src, Exception)
            for rl in shell_run_lines(src):
                if rl.image:
                    yield "image", rl.image[0]
                if rl.command:
                    yield "command", " ".join(word for word, _, _ in rl.command)


@pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)
def test_matcher_and_patterns_agree_over_the_corpus() -> None:
    seen = {"image": 0, "command": 0}
    hits = {"image": 0, "command": 0}
    for kind, text in _corpus_text():
        seen[kind] += 1
        if kind == "image":
            _agree(image=text)
            hits[kind] += match_image(text) is not None
        else:
            _agree(cmd=text)
            hits[kind] += match_command(text) is not None
    # the comparison is not vacuous: thousands of texts, hundreds of them ML
    assert seen["image"] > 2000 and seen["command"] > 500, seen
    assert hits["image"] > 500 and hits["command"] > 100, hits


def test_locations_are_computed_only_for_evidence() -> None:
    calls: list[str] = []

    def at(name: str) -> Location:
        calls.append(name)
        return Location("f.yaml", line=len(calls))

    wl = w.classify(
        images=[("nginx:1.25", lambda: at("nginx")), ("pytorch/pytorch", lambda: at("pt"))],
        env=[("HOME", lambda: at("HOME")), ("NCCL_DEBUG", lambda: at("NCCL"))],
        annotations={"shmguard.io/workload": ("ml", lambda: at("ann"))},
    )
    assert calls == ["pt", "NCCL", "ann"]
    assert [(e.kind, e.location) for e in wl.evidence] == [
        ("annotation", Location("f.yaml", line=3)),
        ("image", Location("f.yaml", line=1)),
        ("env", Location("f.yaml", line=2)),
    ]

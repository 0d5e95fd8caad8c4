"""Workload detection by token (issue 19, reproduction 4): an image or command is ML by a
whole token of an ML framework or server, never by a part of a word; the token lists are
data, each entry with its class."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.config import WORKLOADS
from shmguard.sources.tokenmatch import (
    command_pattern,
    image_pattern,
    match_image,
    parse_image,
)
from shmguard.sources.workload import classify
from shmguard.sources.workload_tokens import CLASSES, COMMAND_TOKENS, IMAGE_TOKENS, Token

#: Images whose names merely hold an ML word inside another word ("verl" in overleaf and
#: verlet, "nemo" in mnemonic, "torch" in torchlight, "ray" in raytracer, "triton" in
#: tritonia, "deepspeed" in deepspeedometer, "vllm" in a registry, "torch" in a tag).
NOT_ML = [
    "sharelatex/overleaf",
    "acme/mnemonic-api",
    "ghcr.io/acme/verlet-physics",
    "acme/torchlight:2",
    "acme/raytracer",
    "acme/ray",  # Ray is rayproject/ray; a repository named ray elsewhere is not matched
    "acme/tritonia",
    "acme/deepspeedometer",
    "vllm.example.com/shop/cart",
    "acme/web:torch-free",
    "postgres:16",
]

#: Images that are ML, and the token the evidence names.
ML = {
    "nvcr.io/nvidia/pytorch:24.01-py3": "pytorch",
    "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime": "pytorch",
    "vllm/vllm-openai:v0.6.0": "vllm",
    "rayproject/ray:2.9.0-gpu": "rayproject/ray",
    "huggingface/transformers-pytorch-gpu": "pytorch",
    "ghcr.io/huggingface/text-generation-inference:2.0": "text-generation-inference",
    "lmsysorg/sglang:latest": "sglang",
    "nvcr.io/nvidia/tritonserver:24.05-py3": "tritonserver",
    "hiyouga/llamafactory:latest": "llamafactory",
    "kserve/huggingfaceserver:v0.15.0": "huggingfaceserver",
    "nvcr.io/nvidia/nemo:24.05": "nemo",
    "verlai/verl:vllm011.latest": "verl",
    "LLaMA-Factory:latest": "LLaMA-Factory",
    # nemotron is NVIDIA's model family: a whole token, ML as the NIM images named by it
    # (nvcr.io/nim/nvidia/llama-3.3-nemotron-super-49b-v1) are; "nemo" inside "mnemonic" is
    # no token at all
    "acme/nemotron-notes": "nemotron",
}

COMMANDS_ML = {
    "torchrun --nproc-per-node 8 train.py": "torchrun",
    "python -m torch.distributed.run --nnodes 2 train.py": "-m torch.distributed.run",
    "accelerate launch train.py": "accelerate launch",
    "deepspeed --num_gpus 8 train.py": "deepspeed",
    "vllm serve meta-llama/Llama-3.1-8B": "vllm serve",
    "python3 -m sglang.launch_server --model-path m": "sglang.launch_server",
}
COMMANDS_NOT_ML = [
    "python manage.py runserver",
    "./mytorchrun.sh",
    "xray start",
    "python -m torchvision_tools",
    "python notvllm.entrypoints.py",  # the old substring pattern's vllm\.entrypoints
    "java -jar overleaf-verlet.jar",
]


@pytest.mark.parametrize("image", NOT_ML)
def test_a_word_inside_a_word_is_no_ml_image(image: str) -> None:
    wl = classify(images=[(image, None)])
    if image.startswith("postgres:"):  # PostgreSQL is its own class (issue 22), never ML
        assert wl.cls == "database", image
        return
    assert wl.cls == "container" and wl.evidence == (), image


@pytest.mark.parametrize(("image", "token"), sorted(ML.items()))
def test_ml_images_and_the_token_their_evidence_names(image: str, token: str) -> None:
    wl = classify(images=[(image, None)])
    assert wl.cls == "ml"
    (ev,) = wl.evidence
    assert (ev.kind, ev.what, ev.cls) == ("image", f"image {image} ({token})", "ml")


@pytest.mark.parametrize(("cmd", "token"), sorted(COMMANDS_ML.items()))
def test_ml_commands_by_phrase(cmd: str, token: str) -> None:
    # ``--nproc-per-node 8`` adds ``args`` evidence beside (test_workload_args.py)
    (ev,) = [e for e in classify(commands=[(cmd, None)]).evidence if e.kind != "args"]
    assert ev.what == f"command runs {token}"


@pytest.mark.parametrize("cmd", COMMANDS_NOT_ML)
def test_a_phrase_inside_a_word_is_no_ml_command(cmd: str) -> None:
    assert classify(commands=[(cmd, None)]).cls == "container", cmd


def test_an_image_reference_is_cut_into_registry_namespace_name_and_tag() -> None:
    for text, parts in (
        (
            "nvcr.io/nvidia/PyTorch:24.01-py3@sha256:ab",
            ("nvcr.io", ("nvidia",), "pytorch", "24.01-py3"),
        ),
        ("localhost:5000/team/torch-train", ("localhost:5000", ("team",), "torch-train", "")),
    ):
        ref = parse_image(text)
        assert (ref.registry, ref.namespace, ref.name, ref.tag) == parts, text
    assert parse_image("rayproject/ray").registry == ""  # no "." or ":": a namespace
    assert parse_image("ubuntu:22.04").path == ("ubuntu:22.04",)
    hit = match_image("docker.io/HuggingFace/text_generation_inference:2")
    assert hit is not None and hit.text == "text_generation_inference"
    assert hit.token.text == "text-generation-inference"


def test_every_token_has_a_known_class_and_is_listed_once() -> None:
    assert set(CLASSES) <= set(WORKLOADS)
    for tokens in (IMAGE_TOKENS, COMMAND_TOKENS):
        assert all(t.cls in CLASSES for t in tokens)
        texts = [t.text for t in tokens]
        assert len(texts) == len(set(texts))
        assert all(t.what for t in tokens)


def test_a_malformed_entry_is_refused() -> None:
    for bad in ("Torch", "a--b", "x:latest", "ns.with.dot/name@sha256:1", "-torch"):
        with pytest.raises(ValueError, match="image token"):
            image_pattern([Token(bad, "ml", "x")])
    with pytest.raises(ValueError, match="command phrase"):
        command_pattern([Token("accelerate  launch", "ml", "x")])
    with pytest.raises(ValueError, match="image token"):  # a versioned tag holds one word
        image_pattern([Token("text-generation", "ml", "x", tag=True)])


def test_check_fix_leaves_the_substring_false_positives_alone(tmp_path: Path) -> None:
    """``check --diff`` (what ``--fix`` would write) through the CLI: the three images of the
    issue get no shm_size; the real ML images get one, and SHM001 names the token."""
    services = {**{f"fp{i}": img for i, img in enumerate(NOT_ML[:3])}}
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n"
        + "".join(f"  {name}:\n    image: {img}\n" for name, img in services.items())
        + "  tgi:\n    image: ghcr.io/huggingface/text-generation-inference:2.0\n"
    )
    r = CliRunner().invoke(app, ["check", "--diff", "--fail-on", "never", str(compose)])
    assert r.exit_code == 0, r.output
    assert r.output.count('+    shm_size: "1g"') == 1, r.output
    r = CliRunner().invoke(app, ["check", "--fail-on", "never", str(compose)])
    assert "(image ghcr.io/huggingface/text-generation-inference:2.0 " in r.output
    assert "(text-generation-inference))" in r.output
    assert "overleaf" not in r.output and "mnemonic" not in r.output and "verlet" not in r.output

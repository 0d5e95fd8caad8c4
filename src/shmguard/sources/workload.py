"""Is a container a PyTorch / NCCL / inference workload? The class and the evidence for it.

A rule has one severity for ordinary containers and one for ML workloads (config.py
:data:`~shmguard.config.WORKLOADS`: ``container`` and ``ml``). A container is ``ml`` when any
evidence is found: an image of an ML framework or server, a launcher command (``torchrun``,
``accelerate launch``, ``deepspeed``, ``python -m torch.distributed.run``, ``vllm serve``,
``sglang.launch_server``, ``text-generation-launcher``, ``tritonserver``, ...), ``NCCL_*`` or
PyTorch environment variables, or an accelerator request (``nvidia.com/gpu``, ``--gpus``,
``--runtime=nvidia``, Compose ``deploy.resources.reservations.devices``, ECS ``GPU``). An
explicit ``shmguard.io/workload`` annotation or label overrides detection; DataLoader
parameters come only from ``shmguard.io/dataloader`` (``num_workers=4,prefetch_factor=2``),
never from guessing (config.py :data:`~shmguard.config.ANNOTATIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from shmguard.config import ANNOTATIONS
from shmguard.model.finding import Location

_IMAGE = re.compile(
    r"pytorch|torch|vllm|sglang|tritonserver|triton|deepspeed|huggingface|"
    r"text-generation-inference|text-embeddings-inference|lmdeploy|nemo|megatron|"
    r"rayproject/ray|axolotl|llama-?factory|openrlhf|verl|djl-serving|tensorrt|"
    r"nvcr\.io/nvidia/(?:pytorch|nemo|tritonserver|tensorrt|dgl|modulus)|kserve/huggingfaceserver",
    re.I,
)
_COMMAND = re.compile(
    r"\btorchrun\b|torch\.distributed\.(?:run|launch)|\baccelerate\s+launch\b|\bdeepspeed\b|"
    r"\bvllm\s+serve\b|vllm\.entrypoints|sglang\.launch_server|text-generation-launcher|"
    r"\btritonserver\b|\blmdeploy\s+serve\b|\btorchserve\b|\bray\s+start\b|"
    r"\bpython[0-9.]*\s+(?:-u\s+)?-m\s+torch\b",
    re.I,
)
#: Environment variable name prefixes that mark an ML container.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "PYTORCH_", "TORCHELASTIC_")
_ENV = re.compile("^(?:" + "|".join(map(re.escape, ENV_PREFIXES)) + ")")
#: The image and command patterns (Python ``re`` syntax that RE2 also reads: no
#: look-around or back-references; matched case-insensitively), for generated policies.
IMAGE_PATTERN = _IMAGE.pattern
COMMAND_PATTERN = _COMMAND.pattern
# The same patterns, case-sensitive, for lower-cased ASCII text (several times faster than
# ``re.I``, and the same matches for ASCII, whose case mapping is one to one), and words one of
# which every command match contains (a command without any is not searched).
_IMAGE_LOWER = re.compile(_IMAGE.pattern)
_COMMAND_LOWER = re.compile(_COMMAND.pattern)
_COMMAND_WORDS = (
    "torch",
    "accelerate",
    "deepspeed",
    "vllm",
    "sglang",
    "text-generation-launcher",
    "tritonserver",
    "lmdeploy",
    "ray",
)

#: Where something was seen: a location, a function giving it (called only when it becomes
#: evidence, so sources need not compute positions for what is not), or None.
Where = Location | Callable[[], Location | None] | None


@dataclass(frozen=True)
class Evidence:
    """One reason for the class: ``kind`` (``image``, ``command``, ``env``, ``gpu``,
    ``annotation``), what was seen (``image nvcr.io/nvidia/pytorch:24.01``) and where."""

    kind: str
    what: str
    location: Location | None = None


@dataclass(frozen=True)
class Workload:
    """The workload class (``ml`` or ``container``), the evidence, and the loader parameters,
    shm size and rule codes not to report (``shmguard.io/ignore``, upper-cased codes or
    prefixes) stated in ``shmguard.io/`` annotations (empty/None when not stated)."""

    cls: str
    evidence: tuple[Evidence, ...] = ()
    loader: Mapping[str, str] = field(default_factory=dict)
    shm_size: str | None = None
    ignore: tuple[str, ...] = ()


def strong(workload: Workload) -> bool:
    """True when the ML class rests on more than an accelerator request: an image, command,
    environment variable or annotation. A GPU alone (``nvidia-smi`` in ``nvidia/cuda``, a GPU
    burn-in, a device plugin check) is no sign of a DataLoader or NCCL: corpus review. SHM001,
    SHM007 and SHM023 ask it of a container, and the webhook of a pod's containers."""
    return workload.cls == "ml" and any(e.kind != "gpu" for e in workload.evidence)


def parse_loader(value: str) -> dict[str, str]:
    """``num_workers=4,prefetch_factor=2`` -> ``{"num_workers": "4", ...}`` (entries without
    ``=`` are dropped)."""
    out: dict[str, str] = {}
    for part in value.split(","):
        k, eq, v = part.partition("=")
        if eq and k.strip():
            out[k.strip()] = v.strip()
    return out


def _at(where: Where) -> Location | None:
    return where() if callable(where) else where


def _search_image(image: str) -> str | None:
    if image.isascii():
        m = _IMAGE_LOWER.search(image.lower())
        return image[m.start() : m.end()] if m else None
    m = _IMAGE.search(image)
    return m.group(0) if m else None


def _search_command(cmd: str) -> str | None:
    if cmd.isascii():
        low = cmd.lower()
        if not any(w in low for w in _COMMAND_WORDS):
            return None
        m = _COMMAND_LOWER.search(low)
        return cmd[m.start() : m.end()] if m else None
    m = _COMMAND.search(cmd)
    return m.group(0) if m else None


def classify(
    *,
    images: Iterable[tuple[str, Where]] = (),
    commands: Iterable[tuple[str, Where]] = (),
    env: Iterable[tuple[str, Where]] = (),
    gpus: Iterable[tuple[str, Where]] = (),
    annotations: Mapping[str, tuple[str, Where]] | None = None,
) -> Workload:
    """The class of one container from what a source exposes about it.

    Args:
        images: image references; commands: command lines (each a string, words joined);
        env: variable names; gpus: descriptions of accelerator requests; annotations:
        annotation/label name -> (value, location), where ``shmguard.io/`` ones are read.
        Each comes with where it was seen (:data:`Where`: a location or a function that
        gives one, called only for what becomes evidence).
    """
    ann = annotations or {}
    ev: list[Evidence] = []
    for image, loc in images:
        if (hit := _search_image(image)) is not None:
            ev.append(Evidence("image", f"image {image} ({hit})", _at(loc)))
    for cmd, loc in commands:
        if (hit := _search_command(cmd)) is not None:
            ev.append(Evidence("command", f"command runs {hit}", _at(loc)))
    for name, loc in env:
        if _ENV.match(name):
            ev.append(Evidence("env", f"environment variable {name}", _at(loc)))
    for desc, loc in gpus:
        ev.append(Evidence("gpu", desc, _at(loc)))
    cls = "ml" if ev else "container"
    stated = ann.get(ANNOTATIONS["workload"])
    if stated is not None and stated[0] in ("ml", "container"):
        cls = stated[0]
        what = f"{ANNOTATIONS['workload']}={stated[0]}"
        ev.insert(0, Evidence("annotation", what, _at(stated[1])))
    loader = ann.get(ANNOTATIONS["dataloader"])
    shm = ann.get(ANNOTATIONS["shm-size"])
    ign = ann.get(ANNOTATIONS["ignore"])
    return Workload(
        cls,
        tuple(ev),
        parse_loader(loader[0]) if loader else {},
        shm[0] if shm else None,
        tuple(c.strip().upper() for c in ign[0].split(",") if c.strip()) if ign else (),
    )

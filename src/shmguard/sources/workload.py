"""Is a container a PyTorch / NCCL / inference workload? The class and the evidence for it.

A rule has one severity for ordinary containers and one for ML workloads (config.py
:data:`~shmguard.config.WORKLOADS`: ``container`` and ``ml``). A container is ``ml`` when any
evidence is found: an image whose namespace or repository name holds the token of an ML
framework or server (``nvcr.io/nvidia/pytorch`` by ``pytorch``, ``lmsysorg/sglang``; never a
part of a token: ``sharelatex/overleaf`` is no ``verl``), a launcher phrase in the command
(``torchrun``, ``accelerate launch``, ``deepspeed``, ``python -m torch.distributed.run``,
``vllm serve``, ``sglang.launch_server``, ``text-generation-launcher``, ``tritonserver``,
...), both from the one token list (:mod:`shmguard.sources.workload_tokens`, matched by
:mod:`shmguard.sources.tokenmatch`), ``NCCL_*`` or PyTorch environment variables, or an
accelerator request (``nvidia.com/gpu``, ``--gpus``,
``--runtime=nvidia``, Compose ``deploy.resources.reservations.devices``, ECS ``GPU``). An
explicit ``shmguard.io/workload`` annotation or label overrides detection; DataLoader
parameters come only from ``shmguard.io/dataloader`` (``num_workers=4,prefetch_factor=2``),
never from guessing (config.py :data:`~shmguard.config.ANNOTATIONS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from shmguard.config import ANNOTATIONS
from shmguard.model.finding import Location
from shmguard.sources.tokenmatch import match_command, match_image
from shmguard.sources.workload_tokens import CLASSES

#: Environment variable name prefixes that mark an ML container.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "PYTORCH_", "TORCHELASTIC_")
_ENV = re.compile("^(?:" + "|".join(map(re.escape, ENV_PREFIXES)) + ")")

#: Where something was seen: a location, a function giving it (called only when it becomes
#: evidence, so sources need not compute positions for what is not), or None.
Where = Location | Callable[[], Location | None] | None


@dataclass(frozen=True)
class Evidence:
    """One reason for the class: ``kind`` (``image``, ``command``, ``env``, ``gpu``,
    ``annotation``), what was seen (``image nvcr.io/nvidia/pytorch:24.01-py3 (pytorch)``:
    the reference and the token found in it), where, and the class it is evidence of (one of
    :data:`~shmguard.sources.workload_tokens.CLASSES`; environment variables and accelerator
    requests are ``ml``)."""

    kind: str
    what: str
    location: Location | None = None
    cls: str = "ml"


@dataclass(frozen=True)
class Workload:
    """The workload class (``ml`` or ``container``), the evidence, and the loader parameters
    (the ``shmguard.io/dataloader`` text as written, read by
    :func:`shmguard.sources.loader.loader_request`), shm size and rule codes not to report
    (``shmguard.io/ignore``, upper-cased codes or prefixes) stated in ``shmguard.io/``
    annotations (empty/None when not stated)."""

    cls: str
    evidence: tuple[Evidence, ...] = ()
    loader: str | None = None
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
        if (hit := match_image(image)) is not None:
            ev.append(Evidence("image", f"image {image} ({hit.text})", _at(loc), hit.token.cls))
    for cmd, loc in commands:
        if (hit := match_command(cmd)) is not None:
            ev.append(Evidence("command", f"command runs {hit.text}", _at(loc), hit.token.cls))
    for name, loc in env:
        if _ENV.match(name):
            ev.append(Evidence("env", f"environment variable {name}", _at(loc)))
    for desc, loc in gpus:
        ev.append(Evidence("gpu", desc, _at(loc)))
    found = {e.cls for e in ev}
    cls = next((c for c in CLASSES if c in found), "container")
    stated = ann.get(ANNOTATIONS["workload"])
    if stated is not None and stated[0] in ("ml", "container"):
        cls = stated[0]
        what = f"{ANNOTATIONS['workload']}={stated[0]}"
        ev.insert(0, Evidence("annotation", what, _at(stated[1]), stated[0]))
    loader = ann.get(ANNOTATIONS["dataloader"])
    shm = ann.get(ANNOTATIONS["shm-size"])
    ign = ann.get(ANNOTATIONS["ignore"])
    return Workload(
        cls,
        tuple(ev),
        loader[0] if loader else None,
        shm[0] if shm else None,
        tuple(c.strip().upper() for c in ign[0].split(",") if c.strip()) if ign else (),
    )

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
parameters for the sizing model come only from ``shmguard.io/dataloader``
(``num_workers=4,prefetch_factor=2``), never from guessing (config.py
:data:`~shmguard.config.ANNOTATIONS`).

The command's arguments are evidence too (:func:`command_args`), read but never deciding the
class alone (``gunicorn --workers 4`` is no DataLoader): a DataLoader worker count
(``--workers 4``, ``--num-workers=4``, ``--num_workers 4``, ``--dataloader-num-workers 4``,
Hydra's ``dataloader.num_workers=4``, a ``num_workers`` key in an inline JSON/YAML config)
above 0, and more than one process per node (``torchrun --nproc-per-node 8``, ``accelerate
launch --num-processes 8``, ``deepspeed --num_gpus 8``), are ``args`` evidence: with an
accelerator request they make the ML class strong (:func:`strong`). A worker count of 0 on at
most one GPU with at most one process per node is the opposite (:func:`no_shm_need`): no
worker process passes batches through /dev/shm and one GPU has no intra-container NCCL peer.
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
    """One reason for the class: ``kind`` (``image``, ``command``, ``env``, ``args``, ``gpu``,
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
    args: Args | None = None
    gpu_count: int | None = 0


@dataclass(frozen=True)
class Args:
    """What a command line states about its DataLoader and processes (:func:`command_args`).

    Attributes:
        workers: the largest DataLoader worker count stated, with its text as written
            (``(0, "--workers=0")``); None when none is stated.
        nproc: processes per node (``torchrun --nproc-per-node``), with its text; the count
            is :data:`PER_GPU` for ``gpu``/``auto`` (one per GPU); None when not stated.
    """

    workers: tuple[int, str] | None = None
    nproc: tuple[int, str] | None = None


#: ``--nproc-per-node gpu`` / ``auto``: one process per GPU.
PER_GPU = -1
_WORKERS = re.compile(
    r"""(?<![\w-])(?:--(?:dataloader[-_])?(?:num[-_]?)?workers(?:=|\s+)"""
    r"""|(?:[\w]+\.)*num_workers["']?\s*[=:]\s*)["']?(\d{1,18})(?![\w.])"""
)
_NPROC = re.compile(
    r"""(?<![\w-])--(?:nproc[-_]per[-_]node|num[-_]processes|num[-_]gpus)(?:=|\s+)["']?"""
    r"""(\d{1,18}|gpu|auto)(?![\w.])"""
)


def command_args(command: str) -> Args | None:
    """The DataLoader worker count and processes per node a command line states (module
    docstring), or None when it states neither. ``${NUM_WORKERS}`` and other values that are
    not whole numbers are not read."""
    workers = [(int(m.group(1)), _said(m.group(0))) for m in _WORKERS.finditer(command)]
    nprocs = [
        (int(v) if v.isdigit() else PER_GPU, _said(m.group(0)))
        for m in _NPROC.finditer(command)
        if (v := m.group(1))
    ]
    if not workers and not nprocs:
        return None
    return Args(
        max(workers, key=lambda w: w[0]) if workers else None,
        max(nprocs, key=lambda n: n[0]) if nprocs else None,
    )


def _said(match: str) -> str:
    """An argument as the messages show it: ``"num_workers": 0`` -> ``num_workers: 0``."""
    return match.replace('"', "").replace("'", "").strip()


def no_shm_need(workload: Workload) -> str | None:
    """Why the workload's own arguments say it needs no /dev/shm beyond the default, or None:
    a stated DataLoader worker count of 0 (every count it states is 0), at most one GPU
    (``--gpus all`` and an unknown count are not one) and at most one process per node
    (``--nproc-per-node gpu`` counts one per GPU). SHM001 reports such a workload at info."""
    args = workload.args
    if args is None or args.workers is None or args.workers[0] != 0:
        return None
    gpus = workload.gpu_count
    if gpus is None or gpus > 1:
        return None
    if args.nproc is not None:
        n = gpus if args.nproc[0] == PER_GPU else args.nproc[0]
        if n > 1:
            return None
    one = "one GPU" if gpus == 1 else "no GPU request"
    return (
        f"{args.workers[1]} starts no DataLoader worker and {one} needs no NCCL shared memory "
        "inside the container"
    )


def strong(workload: Workload) -> bool:
    """True when the ML class rests on more than an accelerator request: an image, command,
    environment variable, annotation, or arguments that say DataLoader workers or several
    processes per node (``args``, :func:`command_args`, with the accelerator request). A GPU
    alone (``nvidia-smi`` in ``nvidia/cuda``, a GPU burn-in, a device plugin check) is no sign
    of a DataLoader or NCCL: corpus review. SHM001, SHM007 and SHM023 ask it of a container,
    and the webhook of a pod's containers."""
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
    gpu_count: int | None = None,
) -> Workload:
    """The class of one container from what a source exposes about it.

    Args:
        images: image references; commands: command lines (each a string, words joined);
        env: variable names; gpus: descriptions of accelerator requests; annotations:
        annotation/label name -> (value, location), where ``shmguard.io/`` ones are read;
        gpu_count: the GPUs the container gets when the source knows (``nvidia.com/gpu: 1``,
        ``--gpus 2``), None for ``all`` or unknown; 0 is taken when no GPU is requested.
        Each comes with where it was seen (:data:`Where`: a location or a function that
        gives one, called only for what becomes evidence).
    """
    ann = annotations or {}
    ev: list[Evidence] = []
    args: Args | None = None
    for image, loc in images:
        if (hit := match_image(image)) is not None:
            ev.append(Evidence("image", f"image {image} ({hit.text})", _at(loc), hit.token.cls))
    said: list[Evidence] = []
    for cmd, loc in commands:
        if (hit := match_command(cmd)) is not None:
            ev.append(Evidence("command", f"command runs {hit.text}", _at(loc), hit.token.cls))
        if (got := command_args(cmd)) is not None:
            args = got
            if got.workers is not None and got.workers[0] > 0:
                said.append(Evidence("args", f"DataLoader workers: {got.workers[1]}", _at(loc)))
            if got.nproc is not None and got.nproc[0] != 1:
                said.append(Evidence("args", f"processes per node: {got.nproc[1]}", _at(loc)))
    for name, loc in env:
        if _ENV.match(name):
            ev.append(Evidence("env", f"environment variable {name}", _at(loc)))
    ev.extend(said)
    ev_gpus = list(gpus)
    for desc, loc in ev_gpus:
        ev.append(Evidence("gpu", desc, _at(loc)))
    found = {e.cls for e in ev if e.kind != "args"}  # arguments only add to a class
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
        args,
        0 if not ev_gpus else gpu_count,
    )

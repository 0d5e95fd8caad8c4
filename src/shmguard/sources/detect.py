"""Workload detection (:mod:`~shmguard.sources.workload`) for each source's containers.

Positions are handed over as functions (:data:`~shmguard.sources.workload.Where`): only
what becomes evidence gets its location computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from shmguard.config import ANNOTATIONS
from shmguard.model.finding import Location
from shmguard.sources.compose import ComposeService
from shmguard.sources.jsonfiles import EcsContainer
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Container, scalars, text
from shmguard.sources.runline import RunLine
from shmguard.sources.workload import Where, Workload, classify
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq
from shmguard.units import whole_number

#: The annotation and label names :func:`classify` reads.
_READ = frozenset(ANNOTATIONS.values())


def _words(node: YNode | None) -> str:
    if isinstance(node, YScalar):
        return node.value
    return " ".join(s.value for s in scalars(node)) if isinstance(node, YSeq) else ""


def _loc(node: YNode | None) -> Where:
    return node.location if node is not None else None


def gpu_number(value: str | None) -> int | None:
    """A whole GPU count (:func:`~shmguard.units.whole_number`: ASCII digits, bounded), else
    None: ``"²"`` and other Unicode digits that ``str.isdigit`` accepts are not numbers to
    ``int()``. The webhook reads the API server's GPU quantities with it too."""
    return whole_number(value) if value else None


def _count(node: YNode | None) -> int | None:
    """A GPU quantity (``nvidia.com/gpu: 1``, ECS ``GPU`` ``"1"``), None when not a number."""
    v = text(node) if isinstance(node, YScalar) else None
    return whole_number(v) if v is not None else None


def run_gpu_count(value: str | None) -> int | None:
    """The GPUs ``--gpus VALUE`` gives: ``2`` -> 2, ``"device=0,1"`` -> 2, ``count=1`` -> 1;
    None for ``all`` and what is not read (docker/cli ``opts/gpus.go``: a number is a count,
    ``device=`` a list of IDs)."""
    v = (value or "").strip().strip("'\"")
    n = whole_number(v) if v else None
    if n is not None:
        return n
    for part in v.split(","):
        k, _, x = part.partition("=")
        if k == "count" and (count := whole_number(x)) is not None and x == x.strip():
            return count
    if v.startswith("device="):
        return len([d for d in v[len("device=") :].split(",") if d.strip()])
    return None


def _compose_gpu_count(svc: ComposeService) -> int | None:
    """``count`` or ``device_ids`` of the service's GPU reservations (``count: all``, or
    neither, is every GPU: None), or ``gpus: N``."""
    total = 0
    for d in svc.gpu_devices:
        ids = d.get("device_ids")
        if isinstance(ids, YSeq):
            total += len(scalars(ids))
        elif (n := _count(d.get("count"))) is not None:
            total += n
        else:
            return None
    g = svc.get("gpus")
    if g is not None:
        n = _count(g)
        return None if n is None else total + n
    return total


def _ann(meta: dict[str, YNode]) -> dict[str, tuple[str, Where]]:
    return {
        k: (v.value, v.location) for k, v in meta.items() if k in _READ and isinstance(v, YScalar)
    }


def pod_container_workload(pod: PodSpec, c: Container) -> Workload:
    """The class of container ``c`` of ``pod``: its own image, command, args, env and GPU
    request, and the pod's ``shmguard.io/`` annotations and labels."""
    cmd = " ".join(x for x in (_words(c.command), _words(c.args)) if x)
    return classify(
        images=[(c.image.value, c.image.location)] if isinstance(c.image, YScalar) else [],
        commands=[(cmd, _loc(c.command or c.args))] if cmd else [],
        env=[(e.name, e.node.location) for e in c.env],
        gpus=[(f"GPU request {c.gpu.raw}", c.gpu.location)] if c.gpu is not None else [],
        annotations={**_ann(pod.labels), **_ann(pod.annotations)},
        gpu_count=_count(c.gpu),
    )


def service_workload(svc: ComposeService) -> Workload:
    """The class of a Compose service (image, command/entrypoint, environment, GPU devices,
    ``gpus:``, ``runtime: nvidia`` and ``shmguard.io/`` labels)."""
    cmd = " ".join(x for x in (_words(svc.entrypoint), _words(svc.command)) if x)
    gpus: list[tuple[str, Where]] = [
        ("deploy.resources.reservations.devices: gpu", d.location) for d in svc.gpu_devices
    ]
    for key in ("gpus", "runtime"):
        n = svc.get(key)
        if n is not None and (key == "gpus" or text(n) == "nvidia"):
            gpus.append((f"{key}: {n.raw}", n.location))
    labels = svc.get("labels")
    ann: dict[str, tuple[str, Where]] = {}
    if isinstance(labels, YMap):
        ann = _ann({k: v for k, (_, v) in labels.entries.items()})
    else:
        for s in scalars(labels):
            k, _, v = s.value.partition("=")
            ann[k] = (v, s.location)
    image = svc.image
    return classify(
        images=[(image.value, image.location)] if isinstance(image, YScalar) else [],
        commands=[(cmd, _loc(svc.command or svc.entrypoint))] if cmd else [],
        env=[(e.name, e.node.location) for e in svc.environment],
        gpus=gpus,
        annotations=ann,
        gpu_count=_compose_gpu_count(svc) if gpus else 0,
    )


def run_workload(rl: RunLine) -> Workload:
    """The class of a run line (image, command, ``-e``, ``--gpus``, ``--runtime=nvidia``,
    ``--device nvidia``, ``--label shmguard.io/...``)."""

    def loc(start: int, end: int) -> Location:
        return Location(rl.file, start=start, end=end)

    def env() -> Iterator[tuple[str, Where]]:
        # one at a time, its place only if it is evidence: a line may set 780k variables
        for f in rl.flags.named("--env"):
            if f.value:
                yield (
                    f.value.partition("=")[0],
                    partial(loc, f.flag_start, f.value_end or f.flag_end),
                )

    gpus, ann = [], {}
    count: int | None = 0
    for f in rl.flags.named("--gpus", "--runtime", "--device", "--label"):
        where = loc(f.flag_start, f.value_end or f.flag_end)
        if f.name == "--gpus" or (f.name == "--runtime" and f.value == "nvidia"):
            gpus.append((f"{f.name} {f.value}", where))
            count = run_gpu_count(f.value) if f.name == "--gpus" and count == 0 else None
        elif f.name == "--device" and f.value and "nvidia" in f.value:
            gpus.append((f"--device {f.value}", where))
            count = None
        elif f.name == "--label" and f.value:
            k, _, v = f.value.partition("=")
            ann[k] = (v, where)
    if rl.tool == "nvidia-docker":
        gpus.append(("nvidia-docker", loc(rl.start, rl.start + len("nvidia-docker"))))
        count = None
    cmd = " ".join(w for w, _, _ in rl.command)
    return classify(
        images=[(rl.image[0], loc(rl.image[1], rl.image[2]))] if rl.image else [],
        commands=[(cmd, loc(rl.command[0][1], rl.command[-1][2]))] if rl.command else [],
        env=env(),
        gpus=gpus,
        annotations=ann,
        gpu_count=count,
    )


def ecs_workload(c: EcsContainer) -> Workload:
    """The class of an ECS container definition."""
    return classify(
        images=[(c.image.value, c.image.location)] if isinstance(c.image, YScalar) else [],
        commands=[(_words(c.command), _loc(c.command))] if c.command is not None else [],
        env=[(e.name, e.node.location) for e in c.env],
        gpus=[(f"GPU {c.gpu.raw}", c.gpu.location)] if c.gpu is not None else [],
        gpu_count=_count(c.gpu),
        annotations=_ann(
            {k: v for k, (_, v) in lab.entries.items()}
            if isinstance(lab := c.node.get("dockerLabels"), YMap)
            else {}
        ),
    )


__all__ = ["ecs_workload", "pod_container_workload", "run_workload", "service_workload"]

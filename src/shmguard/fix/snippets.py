"""The one snippet renderer: a shm size and memory limit in each runtime's exact syntax.

Every command that prints a fix (doctor, measure, probe, plan, check, explain) goes through
:func:`render_snippets`, so a size is written the same way everywhere.

Syntax sources (../shared/research/config_formats.md): Docker/Podman ``--shm-size`` and
``--memory`` take go-units (binary, ``2g``); Compose ``shm_size`` and ``mem_limit`` take the same
strings; Kubernetes ``sizeLimit`` and ``limits.memory`` are quantities (``2Gi``; ``2G`` is
decimal); ECS ``linuxParameters.sharedMemorySize`` and container ``memory`` are integer MiB.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from shmguard.fix.names import VOLUME_NAME
from shmguard.fix.runtime import compose_entry, run_flag
from shmguard.model.fix import RUNTIMES, Change, Setting
from shmguard.units import format_ecs_mib, format_k8s_quantity

__all__ = ["RUNTIMES", "Snippet", "fix_snippets", "render_snippets"]


@dataclass(frozen=True)
class Snippet:
    """A ready-to-paste configuration fragment for one runtime.

    ``runtime`` is one of :data:`RUNTIMES`; ``language`` is the fence language for Markdown
    (``shell``, ``yaml``, ``json``).
    """

    runtime: str
    title: str
    language: str
    text: str


def render_snippets(
    changes: Iterable[Change], runtimes: Iterable[str] | None = None
) -> tuple[Snippet, ...]:
    """Config fragments that apply ``changes`` (a /dev/shm size, optionally a memory limit).

    Args:
        changes: the fix values; one ``shm-size`` or ``shm-mount`` change is required,
            ``memory-limit`` and ``cpu-limit`` changes are optional. Each change's
            ``runtimes`` limit where it applies (empty: everywhere).
        runtimes: a subset of :data:`RUNTIMES`, in the order wanted; default: every runtime when
            a change applies everywhere, else the runtimes the changes name, in the order they
            name them (a fix led by the runtime a log points to keeps it first).

    Returns:
        one :class:`Snippet` per runtime that has a shm change; empty when there is none.

    Raises:
        ValueError: for an unknown runtime name.
    """
    changes = tuple(changes)
    if runtimes is not None:
        chosen = tuple(dict.fromkeys(runtimes))
    elif any(not c.runtimes for c in changes):
        chosen = RUNTIMES
    else:
        chosen = tuple(dict.fromkeys(r for c in changes for r in c.runtimes))
    out = []
    for runtime in chosen:
        if runtime not in _RENDERERS:
            raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
        here = [c for c in changes if not c.runtimes or runtime in c.runtimes]
        shm = next((c.value for c in here if c.setting in _SHM_SETTINGS), None)
        if shm is None:
            continue
        mem = next((c.value for c in here if c.setting is Setting.MEMORY_LIMIT), None)
        cpu = next((c.value for c in here if c.setting is Setting.CPU_LIMIT), None)
        out.append(_RENDERERS[runtime](shm, mem, cpu))
    return tuple(out)


class HasChanges(Protocol):
    """Anything that carries fix values: a :class:`~shmguard.model.Fix`, a
    :class:`~shmguard.estimate.Recommendation`, explain's fix plan."""

    @property
    def changes(self) -> tuple[Change, ...]: ...


def fix_snippets(
    fix: HasChanges | None, runtimes: Iterable[str] | None = None
) -> tuple[Snippet, ...]:
    """:func:`render_snippets` of ``fix.changes`` (empty for None or no changes)."""
    if fix is None or not fix.changes:
        return ()
    return render_snippets(fix.changes, runtimes)


_SHM_SETTINGS = (Setting.SHM_SIZE, Setting.SHM_MOUNT)


def _changes(shm: int, mem: int | None, cpu: int | None) -> list[Change]:
    """The values a snippet writes, in its order: /dev/shm, memory, CPUs."""
    out = [Change(Setting.SHM_SIZE, shm)]
    if mem is not None:
        out.append(Change(Setting.MEMORY_LIMIT, mem))
    if cpu is not None:
        out.append(Change(Setting.CPU_LIMIT, cpu))
    return out


def _docker(shm: int, mem: int | None, cpu: int | None, cli: str = "docker") -> Snippet:
    flags = " ".join(run_flag(c) for c in _changes(shm, mem, cpu))
    title = "docker run" if cli == "docker" else "podman run"
    return Snippet(cli, title, "shell", f"{cli} run {flags} IMAGE ...")


def _podman(shm: int, mem: int | None, cpu: int | None) -> Snippet:
    return _docker(shm, mem, cpu, cli="podman")


def _compose(shm: int, mem: int | None, cpu: int | None) -> Snippet:
    lines = ["services:", "  app:"]
    lines += [f"    {compose_entry(c)}" for c in _changes(shm, mem, cpu)]
    return Snippet("compose", "Compose service", "yaml", "\n".join(lines))


def _kubernetes(shm: int, mem: int | None, cpu: int | None) -> Snippet:
    lines = [
        "spec:",
        "  containers:",
        "    - name: app  # your container's name: these keys merge into it",
        "      volumeMounts:",
        f"        - name: {VOLUME_NAME}",
        "          mountPath: /dev/shm",
    ]
    if mem is not None or cpu is not None:
        which = "requests.memory equal to it keeps"
        if cpu is not None:
            which = "requests equal to these keep"
        lines += [
            "      resources:",
            f"        limits:  # {which} a Guaranteed pod Guaranteed",
        ]
    if mem is not None:
        lines.append(f"          memory: {format_k8s_quantity(mem)}")
    if cpu is not None:
        whole = cpu % 1000 == 0
        lines.append(f'          cpu: "{cpu // 1000}"' if whole else f"          cpu: {cpu}m")
    lines += [
        "  volumes:",
        f"    - name: {VOLUME_NAME}",
        "      emptyDir:",
        "        medium: Memory",
        f"        sizeLimit: {format_k8s_quantity(shm)}",
    ]
    return Snippet("kubernetes", "Kubernetes pod spec", "yaml", "\n".join(lines))


def _ecs(shm: int, mem: int | None, cpu: int | None) -> Snippet:
    lines = ["{"]
    if cpu is not None:  # CPU units: 1024 per vCPU
        lines.append(f'  "cpu": {-(-cpu * 1024 // 1000)},')
    if mem is not None:
        lines.append(f'  "memory": {format_ecs_mib(mem)},')
    lines.append(f'  "linuxParameters": {{"sharedMemorySize": {format_ecs_mib(shm)}}}')
    lines.append("}")
    return Snippet(
        "ecs", "ECS container definition (MiB; not on Fargate)", "json", "\n".join(lines)
    )


_RENDERERS = {
    "docker": _docker,
    "compose": _compose,
    "kubernetes": _kubernetes,
    "podman": _podman,
    "ecs": _ecs,
}

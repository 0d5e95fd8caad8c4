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

from shmguard.model.finding import Snippet
from shmguard.units import format_docker_size, format_ecs_mib, format_k8s_quantity

RUNTIMES = ("docker", "compose", "kubernetes", "podman", "ecs")


def render_snippets(
    shm_size: int,
    memory_limit: int | None = None,
    runtimes: Iterable[str] | None = None,
) -> tuple[Snippet, ...]:
    """Config fragments that give a container ``shm_size`` bytes of /dev/shm.

    Args:
        shm_size: bytes of /dev/shm, > 0.
        memory_limit: container memory limit in bytes (tmpfs pages count against it), or None
            to leave memory alone.
        runtimes: a subset of :data:`RUNTIMES`, in the order wanted; default all.

    Returns:
        one :class:`Snippet` per runtime.

    Raises:
        ValueError: for an unknown runtime name or a size <= 0.
    """
    if shm_size <= 0:
        raise ValueError(f"shm size must be > 0, got {shm_size}")
    chosen = tuple(runtimes) if runtimes is not None else RUNTIMES
    out = []
    for runtime in chosen:
        if runtime not in _RENDERERS:
            raise ValueError(f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")
        out.append(_RENDERERS[runtime](shm_size, memory_limit))
    return tuple(out)


def _docker(shm: int, mem: int | None, cli: str = "docker") -> Snippet:
    flags = f"--shm-size={format_docker_size(shm)}"
    if mem is not None:
        flags += f" --memory={format_docker_size(mem)}"
    title = "docker run" if cli == "docker" else "podman run"
    return Snippet(cli, title, "shell", f"{cli} run {flags} IMAGE ...")


def _podman(shm: int, mem: int | None) -> Snippet:
    return _docker(shm, mem, cli="podman")


def _compose(shm: int, mem: int | None) -> Snippet:
    lines = ["services:", "  app:", f'    shm_size: "{format_docker_size(shm)}"']
    if mem is not None:
        lines.append(f'    mem_limit: "{format_docker_size(mem)}"')
    return Snippet("compose", "Compose service", "yaml", "\n".join(lines))


def _kubernetes(shm: int, mem: int | None) -> Snippet:
    lines = [
        "spec:",
        "  containers:",
        "    - name: app  # your container's name: these keys merge into it",
        "      volumeMounts:",
        "        - name: dshm",
        "          mountPath: /dev/shm",
    ]
    if mem is not None:
        lines += [
            "      resources:",
            "        limits:  # requests.memory equal to it keeps a Guaranteed pod Guaranteed",
            f"          memory: {format_k8s_quantity(mem)}",
        ]
    lines += [
        "  volumes:",
        "    - name: dshm",
        "      emptyDir:",
        "        medium: Memory",
        f"        sizeLimit: {format_k8s_quantity(shm)}",
    ]
    return Snippet("kubernetes", "Kubernetes pod spec", "yaml", "\n".join(lines))


def _ecs(shm: int, mem: int | None) -> Snippet:
    lines = ["{"]
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

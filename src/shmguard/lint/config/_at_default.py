"""SHM001's ``default-size`` variant: a /dev/shm size at or below the runtime's default on an
ML workload, which is no sizing at all.

Docker, containerd and CRI-O give 64 MiB (moby ``config.DefaultShmSize``), Podman 65,536,000
bytes (containers.conf ``shm_size = "65536k"``): ``shm_size: 64m``, ``--shm-size=64m`` and a
dshm emptyDir ``sizeLimit: 64Mi`` leave the job exactly where it was without them. The fix
writes the one sizing policy's size (:func:`~shmguard.lint.config._base.fix_sized`), never one
at or below the default (:func:`~shmguard.lint.config._base.fix_bytes` gives None then).
A milli quantity (``sizeLimit: 64m``) is SHM004's first; its ``64Mi`` is this variant's next.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    compose_memory_limit,
    container_memory_limit,
    edit_fix,
    fix_bytes,
    fix_sized,
    flag_loc,
    ipc_mode,
    is_dev_shm,
    mounts_at_shm,
    replace_flag_value,
    replace_scalar,
    run_memory_limit,
    run_shm_mounts,
    with_size_problem,
)
from shmguard.lint.engine import Violation
from shmguard.model.finding import Edit, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.k8s_model import text
from shmguard.sources.workload import Workload, strong
from shmguard.sources.yamlnode import YScalar
from shmguard.units import (
    DOCKER_DEFAULT_SHM,
    SizeError,
    format_docker_size,
    format_iec,
    format_k8s_quantity,
    k8s_quantity_bytes,
    parse_docker_size,
)

VARIANT = "default-size"
_DEFAULT = "the runtime's default (64 MiB; Podman 65,536,000 bytes)"


def _docker(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = parse_docker_size(value, legacy=True)
    except SizeError:
        return None
    return n if 0 < n <= DOCKER_DEFAULT_SHM else None  # 0 is SHM016's


def _fix(size: int | None, runtime: str, written: str, edit: Edit | None) -> Fix | None:
    if size is None:
        return None
    return edit_fix(
        f"Write {written}",
        f"Give /dev/shm {format_iec(size)} (the sizing policy's default unless --shm-size, the "
        "shmguard.io/shm-size or shmguard.io/dataloader annotation or the configuration says "
        "otherwise; measure the real need with `shmguard measure`): a size at the default "
        "changes nothing.",
        (Change(Setting.SHM_SIZE, size, (runtime,)),),
        edit,
    )


def _message(what: str, at: int, ev: str) -> str:
    return (
        f"{what} ({format_iec(at)}) on an ML workload{ev} is at or below {_DEFAULT}: "
        "/dev/shm is no larger than with no setting at all"
    )


def _evidence(wl: Workload) -> str:
    return f" ({wl.evidence[0].what})" if wl.evidence else ""


def compose(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """A Compose service's ``shm_size`` at or below the default."""
    svc = unit.service
    assert svc is not None
    node = svc.shm_size
    if not isinstance(node, YScalar) or node.placeholder or not strong(unit.workload):
        return
    if ipc_mode(text(svc.ipc)) in ("host", "container", "none"):
        return  # the size is not used (SHM011)
    if any(is_dev_shm(m.target) for m in svc.mounts):
        return  # a mount at /dev/shm wins (SHM012)
    at = _docker(node.value)
    if at is None:
        return
    sized = fix_sized(options, unit.workload, compose_memory_limit(unit))
    size = fix_bytes(sized)
    new = format_docker_size(size) if size is not None else ""
    runtime = "podman" if options.target.compose == "podman-compose" else "compose"
    yield Violation(
        with_size_problem(
            _message(f"service {svc.name!r}: shm_size {node.raw}", at, _evidence(unit.workload)),
            sized,
        ),
        node.location(),
        _fix(size, runtime, f"shm_size: {new}", replace_scalar(node, new) if size else None),
        variant=VARIANT,
    )


def run(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """A run line's ``--shm-size`` at or below the default."""
    rl = unit.run
    assert rl is not None
    flag, ipc = rl.last("--shm-size"), rl.last("--ipc")
    if flag is None or not strong(unit.workload) or run_shm_mounts(rl):
        return
    if ipc is not None and ipc_mode(ipc.value) in ("host", "container", "none"):
        return
    at = _docker(flag.value)
    if at is None:
        return
    sized = fix_sized(options, unit.workload, run_memory_limit(unit))
    size = fix_bytes(sized)
    new = format_docker_size(size) if size is not None else ""
    edit = replace_flag_value(unit.src, flag, new) if size is not None else None
    yield Violation(
        with_size_problem(
            _message(f"--shm-size={flag.value}", at, _evidence(unit.workload)), sized
        ),
        flag_loc(unit, flag),
        _fix(size, "podman" if rl.tool == "podman" else "docker", f"--shm-size={new}", edit),
        variant=VARIANT,
    )


def pod(unit: Unit, options: CheckOptions) -> Iterator[tuple[Violation, Workload]]:
    """A memory emptyDir at /dev/shm whose ``sizeLimit`` is at or below the default, in an ML
    container, with that container's workload (its arguments judge the finding)."""
    p = unit.pod
    assert p is not None
    if "kuberay" in p.notes:
        return  # SHM026's
    for v in p.volumes:
        node = v.size_limit
        if text(v.medium) != "Memory" or not isinstance(node, YScalar) or node.placeholder:
            continue
        if node.value.strip().endswith("m"):
            continue  # milli: SHM004 first
        try:
            at = k8s_quantity_bytes(node.value)
        except SizeError:
            continue
        if not 0 < at <= DOCKER_DEFAULT_SHM:
            continue
        users = [(c, wl) for c, wl in unit.containers if mounts_at_shm(c, v.name) and strong(wl)]
        if not users:
            continue
        wl = users[0][1]
        limits = [container_memory_limit(c) for c, _ in users]
        sized = fix_sized(options, wl, min((n for n in limits if n), default=None))
        size = fix_bytes(sized)
        new = format_k8s_quantity(size) if size is not None else ""
        who = ", ".join(repr(c.name) for c, _ in users)
        message = _message(
            f"volume {v.name!r} (at /dev/shm in {who}): sizeLimit {node.value}", at, _evidence(wl)
        )
        yield (
            Violation(
                with_size_problem(message, sized),
                node.location(),
                _fix(
                    size,
                    "kubernetes",
                    f"sizeLimit: {new}",
                    replace_scalar(node, new) if size is not None else None,
                ),
                variant=VARIANT,
            ),
            wl,
        )

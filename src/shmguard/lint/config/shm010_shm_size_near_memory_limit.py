"""SHM010 shm-size-near-memory-limit: a /dev/shm size above the container's memory limit, or
so close to it that less than the sizing policy's margin is left for the job itself.

tmpfs pages are charged to the memory cgroup of the process that writes them (kernel
``Documentation/admin-guide/cgroup-v2.rst`` "Memory Ownership"): a job whose /dev/shm grows
toward its size is OOM-killed (a process SIGKILLed, exit 137; no SIGBUS) before /dev/shm is
full (runtime_truth.md A2; podman-compose: ``shm_size: 1g`` + ``mem_limit: 256m``, a 400 MiB
write is ``Killed``, runtime_truth.md F). Docker and Podman accept the pair without a word.
"Too close" is the sizing policy's margin (:func:`shmguard.estimate.policy.memory_margin`:
``Policy.memory_margin``, 1 GiB unless configured). For a Kubernetes ``sizeLimit`` above the
memory limit SHM009 reports; this rule reports only the too-close case there.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.estimate.policy import memory_limit_for
from shmguard.fix.k8s import raised_request
from shmguard.fix.k8s_yaml import add_size_limit
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    container_memory_limit,
    fix_bytes,
    fix_sized,
    flag_loc,
    ipc_mode,
    is_dev_shm,
    mounts_at_shm,
    quantity_bytes,
    replace_flag_value,
    replace_scalar,
    sized_shm_mounts,
    sources,
    with_size_problem,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix, Location
from shmguard.model.fix import Change, Setting
from shmguard.sources.k8s_model import text
from shmguard.sources.yamlnode import YMap, YNode, YScalar
from shmguard.units import (
    SizeError,
    format_docker_size,
    format_iec,
    format_k8s_quantity,
    parse_docker_size,
)


def _docker_bytes(node: YNode | None) -> int | None:
    if not isinstance(node, YScalar) or node.placeholder:
        return None
    try:
        return parse_docker_size(node.value, legacy=True) or None
    except SizeError:
        return None


def _too_close(shm: int, limit: int, options: CheckOptions) -> bool:
    return shm + options.policy.memory_margin > limit


def _what(shm: int, limit: int, options: CheckOptions) -> str:
    if shm > limit:
        return (
            f"/dev/shm ({format_iec(shm)}) is above the memory limit ({format_iec(limit)}): "
            "shm pages are charged to that limit, so the job is OOM-killed before /dev/shm "
            "is full"
        )
    return (
        f"/dev/shm ({format_iec(shm)}) leaves {format_iec(limit - shm)} of the "
        f"{format_iec(limit)} memory limit for the job itself, less than the "
        f"{format_iec(options.policy.memory_margin)} margin: shm pages are charged to the limit"
    )


def _fix(
    shm: int,
    new: int,
    options: CheckOptions,
    runtime: str,
    edit: Edit | None,
    shm_key: str,
    memory_key: str,
    new_text: str,
    request: Edit | None = None,
) -> Fix:
    """The fix raising the memory limit; ``request``: the edit raising ``requests.memory``
    with it (they were equal: the pod's QoS class stays Guaranteed)."""
    edits = tuple(e for e in (edit, request) if e is not None)
    with_request = (
        " and requests.memory with it (they are equal: a Guaranteed pod stays Guaranteed)"
        if request
        else ""
    )
    return Fix(
        f"Raise {memory_key} to {new_text}",
        f"Raise {memory_key}{with_request} to {format_iec(new)} ({format_iec(shm)} of /dev/shm "
        f"plus the {format_iec(options.policy.memory_margin)} margin, rounded), or lower "
        f"{shm_key} to what the job needs (measure it with `shmguard measure`).",
        (Change(Setting.MEMORY_LIMIT, new, (runtime,)),),
        edits,
        Applicability.UNSAFE if edit is not None else Applicability.DISPLAY_ONLY,
    )


def _new_limit(shm: int, limit: int, options: CheckOptions) -> int:
    """The sizing policy's memory limit for ``shm`` bytes of /dev/shm beside ``limit``."""
    new = memory_limit_for(shm, options.policy, current_limit=limit, current_shm=shm)
    assert new is not None  # current_limit is given
    return new


def _compose(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    svc = unit.service
    assert svc is not None
    if ipc_mode(text(svc.ipc)) in ("host", "container", "none"):
        return  # the size is not used (SHM011)
    if any(is_dev_shm(m.target) for m in svc.mounts):
        return  # a mount at /dev/shm wins (SHM012)
    shm = _docker_bytes(svc.shm_size)
    if shm is None or not isinstance(svc.shm_size, YScalar):
        return
    memory_node = next(
        (n for n in (svc.deploy_memory, svc.mem_limit) if _docker_bytes(n) is not None), None
    )
    limit = _docker_bytes(memory_node)
    if limit is None or not _too_close(shm, limit, options):
        return
    new = _new_limit(shm, limit, options)
    key = "deploy.resources.limits.memory" if memory_node is svc.deploy_memory else "mem_limit"
    new_text = format_docker_size(new)
    edit = replace_scalar(memory_node, new_text) if isinstance(memory_node, YScalar) else None
    if edit is not None and memory_node is svc.deploy_memory and svc.mem_limit is not None:
        edit = None  # both set: raising one would make them differ (SHM018)
    runtime = "podman" if options.target.compose == "podman-compose" else "compose"
    yield Violation(
        f"service {svc.name!r}: shm_size {svc.shm_size.value}: {_what(shm, limit, options)}",
        svc.shm_size.location(),
        _fix(shm, new, options, runtime, edit, "shm_size", key, new_text),
    )


def _run(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    rl = unit.run
    assert rl is not None
    size_flag, mem_flag, ipc = rl.last("--shm-size"), rl.last("--memory"), rl.last("--ipc")
    if size_flag is None or mem_flag is None or size_flag.value is None or mem_flag.value is None:
        return
    if ipc is not None and ipc_mode(ipc.value) in ("host", "container", "none"):
        return  # the size is not used (SHM011)
    try:
        shm = parse_docker_size(size_flag.value, legacy=True)
        limit = parse_docker_size(mem_flag.value, legacy=True)
    except SizeError:
        return
    if shm <= 0 or limit <= 0 or not _too_close(shm, limit, options):
        return
    new = _new_limit(shm, limit, options)
    new_text = format_docker_size(new)
    edit = replace_flag_value(unit.src, mem_flag, new_text)
    runtime = "podman" if rl.tool == "podman" else "docker"
    yield Violation(
        f"--shm-size={size_flag.value}: {_what(shm, limit, options)}",
        flag_loc(unit, size_flag),
        _fix(shm, new, options, runtime, edit, "--shm-size", "--memory", new_text),
    )


def _pod(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    for v, node, shm, c, limit in sized_shm_mounts(unit):
        if shm > limit or not _too_close(shm, limit, options):
            continue  # above the limit: SHM009 reports it
        new = _new_limit(shm, limit, options)
        new_text = format_k8s_quantity(new)
        mem, req = c.memory_limit, c.memory_request
        edit = replace_scalar(mem, new_text) if isinstance(mem, YScalar) else None
        request = None
        if raised_request(limit, quantity_bytes(req), new) is not None:
            # requests.memory equals the limit: both rise, or the fix is only shown (raising
            # the limit alone would make a Guaranteed pod Burstable)
            request = replace_scalar(req, new_text) if isinstance(req, YScalar) else None
            if request is None:
                edit = None
        loc: Location = node.location()
        yield Violation(
            f"volume {v.name!r}: sizeLimit {node.value} in container {c.name!r}: "
            f"{_what(shm, limit, options)}",
            loc,
            _fix(
                shm,
                new,
                options,
                "kubernetes",
                edit,
                "sizeLimit",
                f"the memory limit of {c.name!r}",
                new_text,
                request,
            ),
        )


def _unsized(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """A memory emptyDir at /dev/shm with no ``sizeLimit`` in a container with a memory limit:
    the kubelet sizes the tmpfs to the memory limit (``calculateEmptyDirMemorySize``), the same
    configuration as ``sizeLimit`` equal to the limit. Raising the limit would raise the tmpfs
    with it, so the fix bounds the tmpfs instead: a ``sizeLimit`` that keeps the margin."""
    pod = unit.pod
    assert pod is not None
    if "kuberay" in pod.notes:
        return  # the operator's shared-mem volume: SHM026
    for v in pod.volumes:
        if v.empty_dir is None or text(v.medium) != "Memory" or v.size_limit is not None:
            continue
        for c, wl in unit.containers:
            limit = container_memory_limit(c)
            if limit is None or not mounts_at_shm(c, v.name):
                continue
            if not _too_close(limit, limit, options):
                continue  # a zero margin: nothing is too close
            sized = fix_sized(options, wl, limit)
            size = fix_bytes(sized)
            edit = None
            if size is not None and isinstance(v.empty_dir, YMap):
                edit = add_size_limit(pod, v.empty_dir, size)
            what = (
                f"volume {v.name!r} (medium: Memory, no sizeLimit) in container {c.name!r}: the "
                f"kubelet sizes it to the {format_iec(limit)} memory limit, so "
                f"{_what(limit, limit, options)}"
            )
            if size is None:
                fix = Fix(
                    "Set a sizeLimit and raise the memory limit",
                    f"Set `sizeLimit` to what the job needs (`shmguard measure`) and raise the "
                    f"memory limit of {c.name!r} so the "
                    f"{format_iec(options.policy.memory_margin)} margin fits beside it.",
                )
            else:
                explicit = sized.source in ("flag", "configured")
                fix = Fix(
                    f"Set sizeLimit: {format_k8s_quantity(size)}",
                    f"Bound the tmpfs at {format_iec(size)}, leaving the margin of the "
                    f"{format_iec(limit)} limit to the job (--shm-size, the shmguard.io/shm-size "
                    "annotation, else the sizing policy's default, capped by the margin; "
                    "measure the real need with `shmguard measure`).",
                    (Change(Setting.SHM_SIZE, size, ("kubernetes",)),),
                    (edit,) if edit is not None else (),
                    Applicability.DISPLAY_ONLY
                    if edit is None
                    else Applicability.SAFE
                    if explicit
                    else Applicability.UNSAFE,
                )
            node = v.medium if v.medium is not None else v.node
            yield Violation(with_size_problem(what, sized), node.location(), fix)
            break  # one finding per volume: the fix is one sizeLimit


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a /dev/shm size that leaves less than the policy's margin of the memory limit."""
    if unit.service is not None:
        yield from _compose(unit, options)
    elif unit.run is not None:
        yield from _run(unit, options)
    elif unit.pod is not None:
        yield from _pod(unit, options)
        yield from _unsized(unit, options)


DOC = RuleDoc(
    what=f"""\
A /dev/shm size that is above the container's memory limit, or leaves less than the sizing
policy's margin beside it (`[tool.shmguard.sizes]` memory margin, 1 GiB by default): Compose
`shm_size` with `mem_limit` or `deploy.resources.limits.memory` (deploy wins, as Compose v1 and
podman-compose apply it), `docker|podman run --shm-size` with `--memory`, and a Kubernetes
memory emptyDir mounted at /dev/shm whose `sizeLimit` is at most the container's
`resources.limits.memory` but within the margin of it (a `sizeLimit` above the limit is SHM009),
or has no `sizeLimit` at all: the kubelet then sizes the tmpfs to the memory limit
(`pkg/volume/emptydir/empty_dir.go` `calculateEmptyDirMemorySize`), the same configuration as
`sizeLimit` equal to the limit (without a memory limit it is SHM008's case).
A size that is not used (`ipc: host`, `service:x`, a mount at /dev/shm: SHM011, SHM012) is not
checked. Measured with Docker Engine 20.10.24, Podman 4.3.1 and podman-compose 1.6.0 (the
writer is killed, exit 137, before /dev/shm is full).
Sources: {sources("compose", "kubernetes", "docker-run", "podman-run")}; the kernel's
`Documentation/admin-guide/cgroup-v2.rst` ("Memory Ownership": tmpfs pages are charged to the
writer's memory cgroup).
""",
    why="""\
Every page written to /dev/shm counts against the memory limit. With /dev/shm as large as the
limit, DataLoader workers or NCCL filling it push the container over its limit: the kernel
kills a process (exit 137, `Killed`, often with no message) long before `No space left on
device` could tell you /dev/shm is full. Docker and Podman accept the pair without a warning.""",
    fix="""\
Raise the memory limit to the /dev/shm size plus what the job needs beside it (the sizing
policy's `memory_limit_for`: the room the job had, at least the margin, plus the size,
rounded up), or lower the /dev/shm size to what the job really uses (`shmguard measure`).
""",
    fix_safety="""\
Unsafe: `--fix --unsafe-fixes` rewrites the memory limit (`mem_limit`,
`deploy.resources.limits.memory`, `--memory`, `resources.limits.memory`) in place, and a
Kubernetes `requests.memory` equal to the limit with it (a Guaranteed pod stays Guaranteed;
when that request cannot be rewritten the fix is shown only); a higher
limit takes memory from the host or node (scheduling, other containers), which the file does not
show. When both `mem_limit` and `deploy.resources.limits.memory` are set the fix is shown only.
Lowering the /dev/shm size instead is shown, never applied: only a measurement says what the job
needs. For a memory emptyDir without `sizeLimit` the fix adds one instead (raising the limit
would raise the tmpfs with it): the size is yours (`--shm-size`, the annotation: safe) or the
sizing policy's default capped by the margin (unsafe: the job may use more today); none is
applied where the margin leaves no more than the 64 MiB default.""",
    applies="unsafe (raise the memory limit; add a sizeLimit)",
    bad=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --shm-size=16g --memory=16g pytorch/pytorch python train.py
""",
    ),
    good=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --shm-size=16g --memory=17g pytorch/pytorch python train.py
""",
    ),
)

RULE = Rule(
    code="SHM010",
    name="shm-size-near-memory-limit",
    summary="A /dev/shm size above, or within the policy's margin of, the memory limit",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("compose", "kubernetes", "docker-run", "podman-run"),
    why=(
        "Shared-memory pages count against the container's memory limit: with /dev/shm as large "
        "as the limit, the job is OOM-killed before /dev/shm is full."
    ),
    doc=DOC,
    check=check,
)

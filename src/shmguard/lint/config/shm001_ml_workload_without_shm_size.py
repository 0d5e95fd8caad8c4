"""SHM001 ml-workload-without-shm-size: a PyTorch / NCCL / inference workload with no /dev/shm
sizing, so it runs in the runtime's 64 MiB default.

Docker, containerd and CRI-O give 64 MiB (moby ``config.DefaultShmSize``, containerd CRI
``defaultShmSize``, CRI-O ``DefaultShmSize``), Podman 65,536,000 bytes (containers.conf
``shm_size = "65536k"``); a DataLoader with workers passes every batch through it, and NCCL
puts its intra-node buffers there. Not flagged (lint_traps.md; public sources in DOC):
``ipc: host`` / ``--ipc=host`` (the host's /dev/shm), ``ipc: service:x`` /
``--ipc=container:x`` (the donor's),
a tmpfs or bind mount at /dev/shm, ``hostIPC: true``, KubeRay pods (the operator mounts a
``shared-mem`` emptyDir into the Ray container itself: kuberay ``ray-operator/controllers/ray/
common/pod.go`` ``addEmptyDir``), and MPIJob launchers (mpirun only; the workers do the work).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from shmguard.estimate.policy import Sized
from shmguard.fix.k8s import ADD, RESIZE, VOLUME_NAME
from shmguard.fix.k8s_yaml import mount_plan, shm_mount_edits
from shmguard.fix.runtime import compose_entry, run_flag
from shmguard.lint.config import _at_default
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    change_edit,
    compose_memory_limit,
    container_memory_limit,
    edit_fix,
    fix_bytes,
    fix_sized,
    ipc_mode,
    is_dev_shm,
    run_memory_limit,
    run_shm_mounts,
    sources,
    span_loc,
    with_size_problem,
)
from shmguard.lint.config._predicates import unmounted_shm_volume
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.k8s_model import Container, Volume, text
from shmguard.sources.workload import Workload, no_shm_need, strong
from shmguard.units import format_iec, format_k8s_quantity

#: Compose keys that make a service something that runs (not only an image to build).
_RUN_KEYS = (
    "command",
    "entrypoint",
    "ports",
    "volumes",
    "environment",
    "env_file",
    "deploy",
    "runtime",
    "gpus",
    "devices",
    "depends_on",
    "network_mode",
    "ipc",
    "healthcheck",
)


_SIZED_TEXT = re.compile(rb"--shm-size|--ipc[= ]+(?:host|container:)|/dev/shm")


#: What each reported class is called in a message.
_CALLED = {"ml": "an ML workload", "browser": "a browser", "database": "PostgreSQL"}
#: The class's own words after the message: what lives in /dev/shm and how it fails.
_HOW = {
    "browser": (
        'Chrome and Firefox keep renderer memory in /dev/shm and crash in 64 MiB ("session '
        "deleted because of page crash\"); where the container cannot change, Chrome's "
        "--disable-dev-shm-usage moves it to /tmp, slower"
    ),
    "database": (
        'parallel query workers map dynamic shared memory in /dev/shm ("could not resize '
        'shared memory segment" when it is full)'
    ),
}


def reported(wl: Workload) -> bool:
    """True for a workload SHM001 asks a /dev/shm for: a strong ML class (:func:`strong`),
    a browser, or PostgreSQL."""
    return strong(wl) or wl.cls in ("browser", "database")


def _called(wl: Workload) -> str:
    return _CALLED.get(wl.cls, "an ML workload")


def _judged(v: Violation, wl: Workload) -> Violation:
    """``v`` as it stands, with the class's words for a browser (variant ``browser``) or at
    info for PostgreSQL whose command asks for no parallel workers (variant ``database``), or
    for an ML workload whose own arguments say it needs no more /dev/shm (variant
    ``no-workers``, :func:`no_shm_need`); an info finding's fix is unsafe: nothing needs it
    while the settings stay so."""
    if wl.cls == "browser":
        return replace(v, message=f"{v.message}; {_HOW['browser']}", variant="browser")
    if wl.cls == "database":
        asked = wl.args.parallel if wl.args is not None else None
        if asked is not None and asked[0] > 0:
            return replace(v, message=f"{v.message}; {asked[1]}: {_HOW['database']}")
        why = (
            f"info only: its {_HOW['database']}, which a database whose command sets no "
            "max_parallel_workers* rarely fills"
        )
        variant = "database"
    else:
        said = no_shm_need(wl)
        if said is None:
            return v
        why, variant = f"info only: {said}", "no-workers"
    fix = v.fix
    if fix is not None and fix.edits:
        fix = replace(fix, applicability=Applicability.UNSAFE)
    return Violation(f"{v.message}; {why}", v.location, fix, variant=variant)


def _evidence(unit: Unit) -> str:
    ev = unit.workload.evidence
    return f" ({ev[0].what})" if ev else ""


def _fix(unit: Unit, sized: Sized, runtime: str, options: CheckOptions) -> Fix | None:
    size = fix_bytes(sized)
    if size is None:
        return None
    change = Change(Setting.SHM_SIZE, size, (runtime,))
    flag = compose_entry(change) if unit.service is not None else run_flag(change)
    why = (
        sized.basis
        if sized.source == "documented"
        else "the sizing policy's default unless --shm-size, the shmguard.io/shm-size or "
        "shmguard.io/dataloader annotation or the configuration says otherwise"
    )
    if unit.quadlet is not None:
        from shmguard.fix.quadlet import shm_line
        from shmguard.units import format_docker_size

        flag = shm_line(unit.quadlet, format_docker_size(size), options.target.podman)
    return edit_fix(
        f"Add {flag}",
        f"Give /dev/shm {format_iec(size)} ({why}; measure the real need with `shmguard measure`).",
        (change,),
        change_edit(unit, change, options.target),
    )


def _k8s_fix(unit: Unit, sized: Sized, c: Container) -> Fix | None:
    size = fix_bytes(sized)
    if size is None:
        return None
    assert unit.pod is not None
    plan = mount_plan(unit.pod, c, size)
    edits = shm_mount_edits(unit.pod, c, size, plan)
    name = plan.volume if plan is not None else VOLUME_NAME
    sizing = (
        f"{sized.basis}; measure the real need with `shmguard measure`"
        if sized.source == "documented"
        else "the sizing policy's default unless --shm-size, the shmguard.io/shm-size or "
        "shmguard.io/dataloader annotation or the configuration says otherwise; measure the real "
        "need with `shmguard measure`"
    )
    if plan is not None and plan.action != ADD:  # the pod's memory emptyDir, reused
        gets = plan.size
        kept = f" (its sizeLimit {format_k8s_quantity(gets)} kept)" if gets is not None else ""
        if plan.action == RESIZE:  # its sizeLimit is SHM008's fix, one edit for the pod
            kept = " (it has no sizeLimit: bound it, as SHM008 says)"
        return Fix(
            f"Mount the memory emptyDir {name!r} at /dev/shm",
            f"Mount the pod's memory-backed emptyDir `{name}` at /dev/shm in the container{kept}.",
            (Change(Setting.SHM_SIZE, gets, ("kubernetes",)),) if gets is not None else (),
            edits or (),
            Applicability.SAFE if edits else Applicability.DISPLAY_ONLY,
        )
    return Fix(
        f"Mount a {format_iec(size)} memory-backed emptyDir at /dev/shm",
        f"Add a volume `{{name: {name}, emptyDir: {{medium: Memory, sizeLimit: "
        f"{format_k8s_quantity(size)}}}}}` to the pod and mount it at /dev/shm in the container "
        f"({sizing}).",
        (Change(Setting.SHM_SIZE, size, ("kubernetes",)),),
        edits or (),
        Applicability.SAFE if edits else Applicability.DISPLAY_ONLY,
    )


def _compose(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    svc = unit.service
    assert svc is not None
    if svc.get("build") is not None and not any(svc.get(k) is not None for k in _RUN_KEYS):
        return  # a build definition (docker compose build), not a service that runs
    if svc.shm_size is not None or ipc_mode(text(svc.ipc)) in ("host", "container"):
        return
    if svc.build_shm_size is not None:
        return  # sized only under build: SHM019 reports it, with the user's own size
    if svc.ipc is not None and ipc_mode(text(svc.ipc)) is None:
        return  # a placeholder: unknown until interpolated
    if any(is_dev_shm(m.target) for m in svc.mounts):
        return
    key = svc.key
    where = key.location() if key is not None else svc.node.location()
    message = (
        f"service {svc.name!r} is {_called(unit.workload)}{_evidence(unit)} with no shm_size: "
        "it gets "
        "Docker's 64 MiB /dev/shm (Podman: 65,536,000 bytes)"
    )
    sized = fix_sized(options, unit.workload, compose_memory_limit(unit))
    v = Violation(with_size_problem(message, sized), where, _fix(unit, sized, "compose", options))
    yield _judged(v, unit.workload)


def _run(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    rl = unit.run
    assert rl is not None
    ipc = rl.last("--ipc")
    if rl.get("--shm-size") or run_shm_mounts(rl):
        return
    flags_text = unit.src.data[rl.start : rl.image[1] if rl.image else rl.end]
    if _SIZED_TEXT.search(flags_text):
        return  # words a doc placeholder cut; after the image it is the container's argument
    if ipc is not None and ipc_mode(ipc.value) in ("host", "container", None):
        return
    default = "65,536,000 bytes" if rl.tool == "podman" else "64 MiB"
    unless = ""
    if rl.opaque:  # expansions the file does not assign: they could hold the flag
        one = len(rl.opaque) == 1
        unless = (
            f" (unless {' or '.join(rl.opaque)} {'sets' if one else 'set'} --shm-size or --ipc; "
            f"the file does not assign {'it' if one else 'them'})"
        )
    late = next((w for w, _, _ in rl.command if w.startswith(("--shm-size", "--ipc"))), None)
    if late is not None:
        unless += f" ({late} after the image is an argument of the container's command)"
    who = "the Dev Container's runArgs: docker run" if unit.devcontainer else rl.tool + " run"
    if unit.quadlet is not None:
        who = "the Quadlet unit's podman run"
    if unit.ci is not None:
        part = f"service {unit.ci.service!r}" if unit.ci.service else "container"
        who = f"GitHub Actions job {unit.ci.job!r} {part} (options): docker run"
    message = (
        f"{who} of {_called(unit.workload)}{_evidence(unit)} without --shm-size or --ipc=host"
        f"{unless}: /dev/shm is the default {default}"
    )
    sized = fix_sized(options, unit.workload, run_memory_limit(unit))
    v = Violation(
        with_size_problem(message, sized),
        span_loc(unit.src, rl.start, rl.start + len(rl.tool.encode())),
        _fix(unit, sized, "podman" if rl.tool == "podman" else "docker", options),
    )
    yield _judged(v, unit.workload)


def _pod(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    pod = unit.pod
    assert pod is not None
    if "kuberay" in pod.notes or "mpi-launcher" in pod.notes:
        return
    if pod.host_ipc is not None and text(pod.host_ipc) in ("true", "True", "yes", "on"):
        return
    memory_volumes = {
        v.name for v in pod.volumes if v.empty_dir is not None and text(v.medium) == "Memory"
    }
    runtime = next((n.partition(":")[2] for n in pod.notes if n.startswith("trainjob")), None)
    by_name = {v.name: v for v in pod.volumes if v.name is not None}
    for c, wl in unit.containers:
        if not reported(wl):
            continue
        at_shm = [m for m in c.volume_mounts if is_dev_shm(text(m.mount_path))]
        who = f"container {c.name!r}" if c.name else "the container"
        role = f" ({pod.role})" if pod.role else ""
        disk = [
            v
            for m in at_shm
            if m.name is not None
            and (v := by_name.get(m.name)) is not None
            and v.empty_dir is not None
            and (v.medium is None or text(v.medium) == "")
        ]
        if disk and len(at_shm) == 1:
            yield _disk_backed(pod.obj.kind, pod.obj.name or "", role, who, disk[0])
            continue
        if at_shm or (runtime is not None and memory_volumes):
            continue
        if unmounted_shm_volume(unit, c, wl) is not None:
            continue  # the pod has a /dev/shm emptyDir this container lacks: SHM007
        ev = f" ({wl.evidence[0].what})" if wl.evidence else ""
        extra = (
            f"; the TrainingRuntime {runtime!r} it uses mounts none unless it says so"
            if runtime is not None
            else ""
        )
        node = c.node.get("name") or c.image or c.node
        message = (
            f"{pod.obj.kind} {pod.obj.name or ''}{role}: {who} is {_called(wl)}{ev} with no "
            f"volume at /dev/shm: it gets the runtime's 64 MiB{extra}".replace("  ", " ")
        )
        sized = fix_sized(options, wl, container_memory_limit(c))
        fix = _k8s_fix(unit, sized, c)
        yield _judged(Violation(with_size_problem(message, sized), node.location(), fix), wl)


def _disk_backed(kind: str, name: str, role: str, who: str, v: Volume) -> Violation:
    """The info finding for a disk-backed emptyDir at /dev/shm (variant
    ``disk-emptydir``)."""
    node = v.medium if v.medium is not None else v.empty_dir
    assert node is not None
    return Violation(
        f"{kind} {name}{role}: {who} mounts the disk-backed emptyDir {v.name!r} at /dev/shm: "
        "no 64 MiB limit, but a directory on the node's disk rather than a tmpfs (shared "
        "memory goes through the page cache and counts as ephemeral storage)".replace("  ", " "),
        node.location(),
        Fix(
            "Write medium: Memory (and a sizeLimit)",
            "For a tmpfs, write `emptyDir: {medium: Memory, sizeLimit: ...}`; its pages then "
            "count against the container's memory limit, so size the limit for it.",
        ),
        variant="disk-emptydir",
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag an ML unit with no /dev/shm sizing (and, at info, a disk-backed /dev/shm)."""
    if unit.kind == "compose" and reported(unit.workload):
        yield from _compose(unit, options)
        yield from (_judged(v, unit.workload) for v in _at_default.compose(unit, options))
    elif unit.kind == "run" and reported(unit.workload):
        yield from _run(unit, options)
        yield from (_judged(v, unit.workload) for v in _at_default.run(unit, options))
    elif unit.kind == "kubernetes":
        yield from _pod(unit, options)
        yield from (_judged(v, wl) for v, wl in _at_default.pod(unit, options))


DOC = RuleDoc(
    what=f"""\
A container that runs PyTorch, NCCL or an inference server (detected by token from its image's
namespace or repository name, `nvcr.io/nvidia/pytorch` by `pytorch`, never by a part of a word:
`sharelatex/overleaf` is no `verl`; by a launcher phrase in its command, `torchrun`,
`accelerate launch`; from its `NCCL_*`/`TORCH_*` environment; or `shmguard.io/workload: ml`;
a GPU request alone is not enough: `nvidia-smi` in `nvidia/cuda` needs no /dev/shm) with no
/dev/shm sizing: a Compose service without `shm_size`, a `docker|podman run` line without
`--shm-size` (also a Dev Container configuration's `runArgs`, a GitHub Actions job or
service container's `options` and a Podman Quadlet `.container` unit: the run they start), a
Kubernetes container with no volume mounted at /dev/shm. A container whose only
/dev/shm is a disk-backed emptyDir (`emptyDir: {{}}` or `medium: ""`) gets an **info** finding
(variant `disk-emptydir`): it does not have the 64 MiB limit, but /dev/shm is then a directory
on the node's disk, not a tmpfs (Kubernetes docs, Volumes, emptyDir: the volume is stored on
the medium that backs the node; only `medium: Memory` mounts a tmpfs), so
shared memory goes through the page cache and counts as the pod's ephemeral storage (over
`sizeLimit` the pod is evicted). Any other volume at /dev/shm (a memory or HugePages emptyDir,
a hostPath, a PVC) is taken as sizing it.
Not flagged: `ipc: host` / `--ipc=host` (the host's /dev/shm), `ipc: service:x` /
`--ipc=container:x` (the donor's), a tmpfs or bind mount at /dev/shm, `hostIPC: true`, KubeRay
pods (the operator mounts /dev/shm into the Ray container itself), MPIJob launchers,
Compose services that only define an image to build (`build:` and nothing that runs), and
services whose size is only under `build:` (SHM019 reports them, with their own size), and
containers of a pod whose /dev/shm emptyDir they do not mount (SHM007 reports them).

The command's arguments are evidence (`sources/workload.py`, the one detector): a DataLoader
worker count (`--workers 4`, `--num-workers=4`, `--num_workers 4`, `--dataloader-num-workers`,
Hydra's `dataloader.num_workers=4`, a `num_workers` key in an inline JSON/YAML config) above 0,
or more than one process per node (`torchrun --nproc-per-node 8`, `accelerate launch
--num-processes`, `deepspeed --num_gpus`), adds to the evidence (with a GPU request it is
enough: `docker run --gpus all acme/trainer python train.py --workers 8`), never alone
(`gunicorn --workers 4` is no DataLoader). A worker count of 0 (every one stated), at most one
GPU in the container (a GPU limit of 1, `--gpus 1`, `--gpus '"device=0"'`, or none; `--gpus
all` and `--gpus 2` are not one) and at most one process per node is an **info** finding
(variant `no-workers`) that says why: no worker process passes batches through /dev/shm, and
one GPU has no NCCL peer in the container (the single-GPU PyTorchJob with `--workers=0`).
Shell run lines are read with the file's own variables (`IMAGE=...`, `DOCKER_OPTS="..."`,
arrays, `${{VAR:-default}}`); an expansion the file does not assign among the flags keeps the
finding, which names it: `(unless $EXTRA_MOUNTS sets --shm-size or --ipc; ...)`. Words after
the image are the container's arguments: `docker run IMAGE --shm-size=1g ...` is reported.
A size at or below the runtime's default is no sizing either (variant `default-size`):
`shm_size: 64m`, `--shm-size=64m` or a dshm `sizeLimit: 64Mi` on an ML workload leaves /dev/shm
at the 64 MiB it would have anyway; its fix writes the sizing policy's size in place
(`sizeLimit: 64m`, which is milli, is SHM004's first, then this one's: `--fix` ends at the
policy's size, never at 64Mi). No fix of any SHM rule writes a size at or below 64 MiB.
KubeRay: kuberay `ray-operator/controllers/ray/common/pod.go` (`addEmptyDir`).

Browsers and PostgreSQL live on /dev/shm too (the `browser` and `database` workload classes,
matched by token from `sources/workload_tokens.py`: `selenium/standalone-*`, `selenium/node-*`,
`cypress/included|browsers|base`, `mcr.microsoft.com/playwright`, `browserless/*`,
`ghcr.io/puppeteer/puppeteer`, `zenika/alpine-chrome`, `chromedp/headless-shell`, the commands
`playwright test` and `cypress run`; `postgres`, `bitnami/postgresql`, `postgis/postgis`,
`timescale/timescaledb`; not `selenium/hub`, `postgres-exporter` or `postgres-operator`). A
browser without a /dev/shm setting is a **warning** (variant `browser`) whose fix gives the 2 GiB
docker-selenium documents (its README runs every browser image with `--shm-size="2g"`): Chrome
and Firefox crash in 64 MiB (`session deleted because of page crash`, `Target crashed`);
Chrome's `--disable-dev-shm-usage` is the workaround where the container cannot change.
PostgreSQL is **info** (variant `database`): its parallel query workers map dynamic shared
memory in /dev/shm (`dynamic_shared_memory_type=posix`, `could not resize shared memory
segment`), which a small database rarely fills; a command that sets
`max_parallel_workers_per_gather`, `max_parallel_workers` or `max_parallel_maintenance_workers`
above 0 makes it a warning. Severities per class: `[tool.shmguard.severity.browser]` and
`[tool.shmguard.severity.database]`.
Sources: {sources("compose", "kubernetes", "docker-run", "podman-run")}.
""",
    why="""\
Docker, containerd and CRI-O give a container 64 MiB of /dev/shm and Podman 65,536,000 bytes.
DataLoader workers pass every batch through it and NCCL keeps its intra-node buffers there:
the job dies with `Bus error`, `No space left on device` or a DataLoader worker killed by
SIGBUS.""",
    fix="""\
Compose: `shm_size: "1g"`; docker/podman: `--shm-size=1g`; Kubernetes: a volume
`{name: dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}` mounted at /dev/shm. The size is
`check --shm-size`, else the `shmguard.io/shm-size` annotation, else the DataLoader model's size
for the `shmguard.io/dataloader` parameters, else the sizing policy's default (1 GiB,
`[tool.shmguard.sizes]`), capped so a memory limit keeps its margin. Where the memory limit
would not keep the policy's margin beside the size, no fix is offered.
""",
    fix_safety="""\
Safe: `--fix` inserts one entry (Compose `shm_size`: a line at the service's indentation, or
the first entry of a flow mapping `{shm_size: "1g", image: ...}`), one flag
(after `run`), or, in Kubernetes, a volume `dshm` (last in the pod spec's `volumes`, the key
added when absent; `dshm-1`... when the name is taken) and a `volumeMounts` entry at /dev/shm
(last in the container's), in the file's block or flow style and line endings; nothing else
changes. A memory emptyDir the pod already mounts at /dev/shm, or mounts nowhere, is reused.
tmpfs pages are only charged when written, so nothing is reserved; where a memory limit would
not keep the policy's margin beside the size, no fix is offered. Services and pods reached
through YAML anchors, TrainJobs (whose pod spec is in the runtime) and `volumes: null` get the
fix shown, not applied. The disk-backed emptyDir's info finding's fix (`medium: Memory` and a
`sizeLimit`) is shown, never applied: it moves the pages into the container's memory limit.
The `no-workers` and `database` info findings' fix is unsafe (applied with `--unsafe-fixes`):
nothing needs it while the arguments stay as they are. On a run line the flag goes right after
`run`, never into a variable the line expands: a `--shm-size` the variable holds comes later
and wins. In a Dev Container configuration `"--shm-size=1g"` is added to `runArgs` (the key
added when absent) in the file's formatting, comments kept; in a GitHub Actions container it
is appended to `options` (added when absent); in a Podman Quadlet `.container` unit a line
`ShmSize=1g` (Podman 4.7+ targeted) or `PodmanArgs=--shm-size=1g` goes after `Image=`.""",
    applies="safe (unsafe for no-workers and database)",
    variant_words={
        "disk-emptydir": "for a disk-backed emptyDir at /dev/shm",
        "no-workers": "when the arguments say no DataLoader worker on at most one GPU",
        "default-size": "for a size at or below the runtime's 64 MiB default",
        "browser": "for a browser (Selenium, Playwright, Cypress, Puppeteer)",
        "database": "for PostgreSQL whose command asks for no parallel workers",
    },
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: nvcr.io/nvidia/pytorch:24.01-py3
    command: torchrun --nproc-per-node 8 train.py
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    shm_size: "1g"
    image: nvcr.io/nvidia/pytorch:24.01-py3
    command: torchrun --nproc-per-node 8 train.py
""",
    ),
)

RULE = Rule(
    code="SHM001",
    name="ml-workload-without-shm-size",
    summary=(
        "A PyTorch / NCCL / inference workload (or a browser, PostgreSQL) with no /dev/shm "
        "sizing (64 MiB by default)"
    ),
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("compose", "kubernetes", "docker-run", "podman-run"),
    why=(
        "Without a /dev/shm setting the container gets the runtime's 64 MiB; DataLoader workers "
        "and NCCL fill it and the job dies with a Bus error or 'No space left on device'."
    ),
    doc=DOC,
    check=check,
    variants={
        "disk-emptydir": Severity.INFO,
        "no-workers": Severity.INFO,
        "browser": Severity.WARNING,
        "database": Severity.INFO,
        _at_default.VARIANT: Severity.WARNING,
    },
)

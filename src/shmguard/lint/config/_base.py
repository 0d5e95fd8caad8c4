"""What every SHM rule shares: the subject a rule checks, its options, and edit helpers.

A rule's subject is one :class:`Unit`: a Compose service, a Kubernetes pod spec or a
``docker|podman run`` line, with the file's text (for byte offsets and line/column) and the
unit's workload class (:mod:`shmguard.sources.detect`). :func:`shmguard.lint.check.units`
cuts a loaded file into units; :func:`shmguard.lint.engine.run_rules` runs the rules over each
with its workload class, so severities follow ``[tool.shmguard.severity.ml]`` / ``.container``.

Edits are splices at node byte offsets (:class:`~shmguard.model.finding.Edit`): a YAML scalar's
value is replaced inside its quotes, a line is inserted at a mapping's indentation with the
file's own line ending, a flag is spliced after ``run``. Nothing is ever re-dumped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shmguard.estimate.policy import Policy, Sized
from shmguard.fix.yamledit import line_break
from shmguard.fix.yamledit import line_ending as line_ending
from shmguard.model.finding import Applicability, Edit, Fix, Location
from shmguard.model.fix import Change
from shmguard.model.target import Target
from shmguard.sources.ci import CiContainer
from shmguard.sources.compose import ComposeService
from shmguard.sources.devcontainer import DevContainer
from shmguard.sources.jsonfiles import DaemonConfig, EcsTaskDefinition
from shmguard.sources.k8s import K8sObject, PodSpec
from shmguard.sources.k8s_model import DEV_SHM as DEV_SHM
from shmguard.sources.k8s_model import Container, Volume, text
from shmguard.sources.k8s_model import is_dev_shm as is_dev_shm
from shmguard.sources.k8s_model import quantity_bytes as quantity_bytes
from shmguard.sources.loader import workload_sized
from shmguard.sources.quadlet import QuadletUnit
from shmguard.sources.runline import Flag, RunLine
from shmguard.sources.text import SourceText
from shmguard.sources.workload import Workload
from shmguard.sources.yamlnode import YMap, YNode, YScalar
from shmguard.units import (
    DOCKER_DEFAULT_SHM,
    SizeError,
    parse_docker_size,
)

if TYPE_CHECKING:
    from shmguard.model.proposal import Proposal


#: Fields of a Compose service that hold a go-units byte value (compose-spec
#: ``schema/compose-spec.json``; config_formats.md 2.1).
COMPOSE_SIZE_FIELDS = (
    "shm_size",
    "mem_limit",
    "memswap_limit",
    "mem_reservation",
    "build.shm_size",
    "deploy.resources.limits.memory",
    "deploy.resources.reservations.memory",
)
#: ``docker|podman run`` flags that take a go-units byte value (docker/cli
#: ``cli/command/container/opts.go``: ``opts.MemBytes`` / ``MemSwapBytes``).
RUN_SIZE_FLAGS = ("--shm-size", "--memory", "--memory-swap", "--memory-reservation")


@dataclass(frozen=True)
class Unit:
    """One thing a rule checks: exactly one of ``service``, ``pod``, ``run``, ``ecs`` and
    ``daemon`` is set.

    Attributes:
        src: the file's text (bytes, offsets, line/column).
        kind: ``compose``, ``kubernetes``, ``run``, ``ecs`` (an ECS task definition or Batch
            job definition) or ``daemon-json``.
        workload: the unit's class and evidence (for a pod: ``ml`` when any main container is).
        containers: for a pod, each main (non-init) container with its own workload.
        devcontainer: for the ``run`` of a Dev Container configuration, that configuration
            (its ``runArgs`` take a fix's flag; ``src`` is its blanked text).
        ci: for the ``run`` of a GitHub Actions job or service container, that container
            (its ``options`` take a fix's flag).
        quadlet: for the ``run`` of a Podman Quadlet ``.container`` unit, that unit (a fix
            writes ``ShmSize=`` or ``PodmanArgs=``).
        policy: for a ``policy`` unit, the admission policy (Kyverno, Gatekeeper); victims:
            (kind, name) of the workloads in the same file with an ML container that mounts a
            memory emptyDir at /dev/shm (the ones such a policy would shrink).
    """

    src: SourceText
    kind: str
    workload: Workload
    service: ComposeService | None = None
    pod: PodSpec | None = None
    run: RunLine | None = None
    ecs: EcsTaskDefinition | None = None
    daemon: DaemonConfig | None = None
    containers: tuple[tuple[Container, Workload], ...] = ()
    devcontainer: DevContainer | None = None
    ci: CiContainer | None = None
    quadlet: QuadletUnit | None = None
    policy: K8sObject | None = None
    victims: tuple[tuple[str, str], ...] = ()

    @property
    def file(self) -> str:
        """The path as given (``-`` for stdin)."""
        return self.src.file


@dataclass(frozen=True)
class CheckOptions:
    """Options of the SHM rules.

    Attributes:
        policy: the sizing policy (default /dev/shm size, memory margin).
        shm_size: the /dev/shm size a fix writes (``check --shm-size``), overriding the policy.
        target: the tools and versions assumed (``--target``; :mod:`shmguard.model.target`).
        proposals: sizes proposed per workload container (``recommend --manifests``), which
            only :data:`shmguard.lint.proposal.RULE` reads; empty for ``check``.
    """

    policy: Policy = field(default_factory=Policy)
    shm_size: int | None = None
    target: Target = field(default_factory=Target)
    proposals: tuple[Proposal, ...] = ()


def fix_sized(options: CheckOptions, workload: Workload, memory_limit: int | None) -> Sized:
    """The one size decision over what ``check --fix`` knows
    (:func:`~shmguard.sources.loader.workload_sized`, the webhook's evidence): ``--shm-size``;
    the ``shmguard.io/shm-size`` annotation or label; the DataLoader model's size for the
    ``shmguard.io/dataloader`` parameters; the sizing policy's default (1 GiB unless
    configured), capped so ``memory_limit`` (bytes, or None) keeps the policy's margin.
    ``problems`` names an annotation that could not be read; ``memory_limit`` is set ("no
    room") when the limit leaves no room for the size beside the margin."""
    return workload_sized(workload, memory_limit, options.policy, flag=options.shm_size)


def fix_bytes(sized: Sized) -> int | None:
    """Bytes of /dev/shm a fix writes for the decision ``sized``, or None where there is no
    room (a larger /dev/shm would need the memory limit raised, which a fix does not do
    unasked) or where the size is at or below the runtimes' 64 MiB default: such a size
    changes nothing, so a fix never writes it (issue 21, "the default is not a fix")."""
    if sized.memory_limit is not None or sized.bytes <= DOCKER_DEFAULT_SHM:
        return None
    return sized.bytes


def fix_size(options: CheckOptions, workload: Workload, memory_limit: int | None) -> int | None:
    """:func:`fix_bytes` of :func:`fix_sized`."""
    return fix_bytes(fix_sized(options, workload, memory_limit))


def with_size_problem(message: str, sized: Sized) -> str:
    """``message``, followed by the warnings of the annotations the decision ``sized`` could
    not read (a ``shmguard.io/shm-size`` or ``shmguard.io/dataloader`` that does not parse,
    where no ``--shm-size`` made them moot), so the user sees why the fix writes another size
    (the webhook puts the same sentences in its warnings)."""
    return "; ".join((message, *sized.problems))


def node_loc(node: YNode) -> Location:
    """The location of a YAML node."""
    return node.location()


def span_loc(src: SourceText, start: int, end: int) -> Location:
    """The location of bytes ``start:end`` of ``src`` (a run line's flag or value)."""
    line, col = src.line_col(start)
    end_line, end_col = src.line_col(end)
    return Location(src.file, line, col, end_line, end_col, start, end)


def flag_loc(unit: Unit, flag: Flag) -> Location:
    """The location of a run line flag with its value."""
    return span_loc(unit.src, flag.flag_start, flag.value_end or flag.flag_end)


def replace_scalar(node: YScalar, new: str) -> Edit | None:
    """An edit writing ``new`` as the value of ``node``, inside its quotes; None for a block
    scalar or one whose text could not be located exactly."""
    raw = node.raw
    if node.style == "plain" and raw == node.value:
        return Edit(node.start, node.end, new)
    quoted = node.style in ("single", "double") and len(raw) >= 2 and raw[0] == raw[-1]
    if quoted and raw[1:-1] == node.value:
        return Edit(node.start + 1, node.end - 1, new)
    return None


def edit_fix(title: str, description: str, changes: tuple[Change, ...], edit: Edit | None) -> Fix:
    """A fix that applies ``edit`` with ``--fix`` (safe), or is only shown when no edit could be
    made (a value reached through an anchor, a placeholder)."""
    if edit is None:
        return Fix(title, description, changes, (), Applicability.DISPLAY_ONLY)
    return Fix(title, description, changes, (edit,), Applicability.SAFE)


def replace_flag_value(src: SourceText, flag: Flag, new: str) -> Edit | None:
    """An edit writing ``new`` as the value of a run line flag (inside its quotes)."""
    if flag.value is None or flag.value_start is None or flag.value_end is None:
        return None
    raw = src.data[flag.value_start : flag.value_end].decode("utf-8", "replace")
    if raw == flag.value:
        return Edit(flag.value_start, flag.value_end, new)
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"" and raw[1:-1] == flag.value:
        return Edit(flag.value_start + 1, flag.value_end - 1, new)
    return None


def insert_key(mapping: YMap, line: str) -> Edit | None:
    """An edit inserting ``line`` (``key: value``) as the first entry of ``mapping``.

    Block mapping: a line at the indentation of its first key, with the file's line ending.
    Flow mapping (``{image: x, command: y}``): ``key: value, `` right after its ``{`` (``{}``
    gets the entry alone). None for a mapping reached through an alias or merge key (an edit
    would change every user of the anchor), an empty block mapping, or one whose first key
    does not start its line.
    """
    node = mapping.node
    src = mapping.src
    if mapping.shared:
        return None
    if getattr(node, "flow_style", False):
        if src.data[mapping.start : mapping.start + 1] != b"{":
            return None
        return Edit(mapping.start + 1, mapping.start + 1, line + (", " if node.value else ""))
    if not node.value:
        return None
    first = node.value[0][0]
    key_at = src.byte_offset(first.start_mark.index)
    line_start = src.data.rfind(line_break(src), 0, key_at) + 1
    indent = src.data[line_start:key_at]
    if indent.strip(b" ") or b"\t" in indent:
        return None
    return Edit(line_start, line_start, indent.decode() + line + line_ending(src))


_RUN_WORD = re.compile(rb"(?<![\w-])run(?![\w-])")


def insert_run_flag(unit: Unit, flag: str) -> Edit | None:
    """An edit splicing `` <flag>`` right after the ``run`` word of the unit's run line."""
    rl = unit.run
    if rl is None:
        return None
    stop = rl.flags[0].flag_start if rl.flags else rl.image[1] if rl.image else rl.end
    region = unit.src.data[rl.start : stop]
    found = list(_RUN_WORD.finditer(region))
    if not found:
        return None
    at = rl.start + found[-1].end()
    return Edit(at, at, f" {flag}")


def mount_target(value: str) -> str | None:
    """The container path of a ``--mount`` value (``dst=``, ``destination=``, ``target=``)."""
    for part in value.split(","):
        k, _, v = part.partition("=")
        if k.strip() in ("dst", "destination", "target"):
            return v.strip()
    return None


def run_shm_mounts(rl: RunLine) -> list[Flag]:
    """``--tmpfs``, ``--volume`` and ``--mount`` flags of a run line that mount /dev/shm."""
    return [f for f in rl.flags.named(*_MOUNT_FLAGS) if is_dev_shm(run_mount_target(f))]


#: The flags :func:`run_mount_target` reads.
_MOUNT_FLAGS = ("--tmpfs", "--volume", "--mount")


def run_mount_target(f: Flag) -> str | None:
    """The container path a ``--tmpfs``, ``--volume`` or ``--mount`` flag mounts, else None."""
    v = f.value or ""
    if f.name == "--tmpfs":
        return v.partition(":")[0]
    if f.name == "--volume":
        parts = v.split(":")
        return parts[1] if len(parts) >= 2 else None
    if f.name == "--mount":
        return mount_target(v)
    return None


def ipc_mode(value: str | None) -> str | None:
    """The IPC mode's kind: ``host``, ``none``, ``container`` (also Compose ``service:``),
    ``private``, ``shareable``, or None when unset or a placeholder."""
    if not value or "$" in value or "{" in value:
        return None
    v = value.strip().lower()
    if v.startswith(("container:", "service:")):
        return "container"
    return v


def compose_memory_limit(unit: Unit) -> int | None:
    """A Compose service's memory limit in bytes (``deploy.resources.limits.memory`` wins
    over ``mem_limit``, as Compose v1 and podman-compose apply it: runtime_truth.md E, F),
    or None when unset or unreadable."""
    svc = unit.service
    if svc is None:
        return None
    for node in (svc.deploy_memory, svc.mem_limit):
        if isinstance(node, YScalar) and not node.placeholder:
            try:  # go-units v0.4 reads what v0.5 does, and 2Gi too (SHM002 flags that)
                return parse_docker_size(node.value, legacy=True) or None
            except SizeError:
                continue
    return None


def run_memory_limit(unit: Unit) -> int | None:
    """A run line's ``--memory`` in bytes, or None."""
    f = unit.run.last("--memory") if unit.run is not None else None
    if f is None or f.value is None:
        return None
    try:
        return parse_docker_size(f.value, legacy=True) or None
    except SizeError:
        return None


def container_memory_limit(c: Container) -> int | None:
    """A container's ``resources.limits.memory`` in bytes, or None (0 too)."""
    return quantity_bytes(c.memory_limit) or None


def mounts_at_shm(c: Container, volume: str | None) -> bool:
    """Whether container ``c`` mounts the volume named ``volume`` at /dev/shm."""
    return any(m.name == volume and is_dev_shm(text(m.mount_path)) for m in c.volume_mounts)


def sized_shm_mounts(unit: Unit) -> Iterator[tuple[Volume, YScalar, int, Container, int]]:
    """Each memory-backed emptyDir with a ``sizeLimit`` that parses, with each container of
    ``unit`` that mounts it at /dev/shm and has a memory limit: (volume, the sizeLimit scalar,
    its bytes, container, the limit's bytes). SHM009 and SHM010 compare the two sizes."""
    from shmguard.units import k8s_quantity_bytes

    pod = unit.pod
    if pod is None:
        return
    for v in pod.volumes:
        node = v.size_limit
        if text(v.medium) != "Memory" or not isinstance(node, YScalar) or node.placeholder:
            continue
        try:
            size = k8s_quantity_bytes(node.value)
        except SizeError:
            continue
        for c, _ in unit.containers:
            if not mounts_at_shm(c, v.name):
                continue
            limit = container_memory_limit(c)
            if limit is not None:
                yield v, node, size, c, limit


#: Where an SHM rule's facts about each runtime come from (user docs: ``shmguard rule``,
#: docs/rules-shm.md), and the versions measured where they disagree. Public sources only;
#: the developers' notes behind them (shared/research/config_formats.md, runtime_truth.md,
#: lint_traps.md) are not shipped.
_SOURCES = {
    "docker": "Docker (the `docker run` reference, docker/cli `cli/command/container/opts.go`, "
    "docker/go-units `RAMInBytes`, moby's 64 MiB `DefaultShmSize`)",
    "compose": "Compose (compose-spec `spec.md`, `build.md#shm_size`, "
    "`schema/compose-spec.json`; compose-go)",
    "podman": "Podman (`podman-run(1)`, `containers.conf(5)`)",
    "kubernetes": "Kubernetes (the emptyDir and memory-unit documentation, k8s.io/apimachinery "
    "`resource.Quantity`, the kubelet's `pkg/volume/emptydir/empty_dir.go`)",
}
_MEASURED = {
    "docker": "Docker Engine 20.10.24 (CLI 28.2.2, 20.10.24)",
    "compose": "Compose 1.29.2, podman-compose 1.6.0",
    "podman": "Podman 4.3.1",
}
#: A rule's target -> the runtimes whose sources it rests on.
_RUNTIMES = {
    "docker-run": ("docker",),
    "podman-run": ("podman",),
    "compose": ("docker", "compose"),
    "daemon-json": ("docker",),
    "ecs": ("docker",),
    "kubernetes": ("kubernetes",),
    "kubernetes-policy": ("kubernetes",),
}


def sources(*targets: str) -> str:
    """The sources of a rule that checks ``targets`` (its ``Rule.targets``), as a phrase for
    its "What it detects" (``Sources: {sources("compose", "docker-run")}.``): the runtimes'
    own documentation and source for those targets only, the kernel's tmpfs documentation
    (``Documentation/filesystems/tmpfs.rst``), and the versions measured where they disagree.

    Raises:
        KeyError: for a target no rule checks.
    """
    runtimes = {r for t in targets for r in _RUNTIMES[t]}
    kinds = [k for k in _SOURCES if k in runtimes]
    text = "; ".join([*(_SOURCES[k] for k in kinds), "the kernel's `tmpfs.rst`"])
    measured = [_MEASURED[k] for k in kinds if k in _MEASURED]
    if measured:
        text += f"; where versions disagree, measured with {', '.join(measured)}"
    return text


def pod_quantities(unit: Unit) -> Iterator[tuple[str, YScalar]]:
    """The memory quantities of a pod spec: each emptyDir ``sizeLimit`` and each container's
    (init containers too) ``resources.{limits,requests}.memory``, as (field, scalar)."""
    pod = unit.pod
    if pod is None:
        return
    for v in pod.volumes:
        if isinstance(v.size_limit, YScalar):
            yield "emptyDir.sizeLimit", v.size_limit
    for c in (*pod.containers, *pod.init_containers):
        for what, node in (("limits", c.memory_limit), ("requests", c.memory_request)):
            if isinstance(node, YScalar):
                yield f"resources.{what}.memory", node


def change_edit(unit: Unit, change: Change, target: Target | None = None) -> Edit | None:
    """The edit that writes ``change`` into a Compose service or a run line, in the text the
    snippets print (:mod:`shmguard.fix.runtime`): ``shm_size: "1g"`` inserted as the service's
    first entry, ``--shm-size=1g`` after ``run``; None when it cannot be placed, or for a
    unit that is neither."""
    from shmguard.fix.runtime import compose_entry, run_flag

    if unit.service is not None:
        return insert_key(unit.service.node, compose_entry(change))
    if unit.quadlet is not None:
        from shmguard.fix.quadlet import add_shm_size
        from shmguard.units import format_docker_size

        podman = (target or Target()).podman
        return add_shm_size(unit.quadlet, format_docker_size(change.value), podman)
    if unit.ci is not None:
        from shmguard.fix.ci import add_option

        return add_option(unit.ci, run_flag(change))
    if unit.devcontainer is not None:
        from shmguard.fix.devcontainer import add_run_arg

        return add_run_arg(unit.devcontainer, run_flag(change))
    if unit.run is not None:
        return insert_run_flag(unit, run_flag(change))
    return None

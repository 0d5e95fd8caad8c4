"""Proposed sizes applied to Kubernetes manifests through ``check --fix``'s own machinery.

``shmguard recommend --manifests PATH`` proposes, per workload container, a /dev/shm size and
maybe a memory limit (:class:`Proposal`, the values as :class:`~shmguard.model.fix.Change`).
Here they become one more rule, :data:`RULE` (``REC001``), run by the one rule engine over
the file's pod specs: a pod spec of the proposal's object (kind and name, and namespace when
the manifest has one) whose /dev/shm or memory limit differs yields one finding per setting,
each with a safe fix made by the same edit helpers as the SHM rules' fixes
(:mod:`~shmguard.fix.k8s_yaml` adds the memory-backed emptyDir and its mount,
:func:`~shmguard.lint.config._base.replace_scalar` resizes a ``sizeLimit``). The rule is not in
``check``'s catalogue: it has nothing to compare without a proposal.
:func:`~shmguard.lint.check.fix_file` applies the edits round by round, so every byte outside
them is kept, and a second run finds nothing to change.

What is set (the proposal's sizes; memory limits as :func:`set_memory_limit` says):

* a container without /dev/shm: an emptyDir ``{medium: Memory, sizeLimit}`` and its mount
  (an unmounted memory emptyDir of the pod is reused, as check's fix does);
* a memory-backed emptyDir at /dev/shm: its ``sizeLimit`` set (added when absent), and a
  ``shmguard.io/shm-size`` annotation the pod carries updated to the same size;
* node-mode rows (no container, an emptyDir's name): that volume's ``sizeLimit``.

A /dev/shm that is not a memory-backed emptyDir (a disk emptyDir, a misspelt medium, a
hostPath) is reported with its fix shown, not applied: which one the user meant is theirs to
say (``check`` reports it: SHM001, SHM006).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from shmguard.config import ANNOTATIONS, Config
from shmguard.estimate.policy import clean_size
from shmguard.fix.k8s import raised_request
from shmguard.fix.k8s_yaml import add_size_limit, placeable, shm_mount_edits
from shmguard.fix.yamledit import Style, Value, add_entry, fill_null, json_text
from shmguard.lint.check import FixResult, fix_file
from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    edit_fix,
    is_dev_shm,
    quantity_bytes,
    replace_scalar,
)
from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix
from shmguard.model.fix import Change, Setting
from shmguard.model.proposal import Proposal as Proposal
from shmguard.sources.diagnostics import SourceDiagnostic
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import Container, Volume, text
from shmguard.sources.yamlnode import YMap, YScalar
from shmguard.units import (
    DOCKER_DEFAULT_SHM,
    SizeError,
    format_iec,
    format_k8s_quantity,
    parse_size_annotation,
)

#: The least /dev/shm size a proposal writes: the sizing policy's next clean size above the
#: 64 MiB default (80 MiB).
ABOVE_DEFAULT = clean_size(DOCKER_DEFAULT_SHM + 1)

CODE = "REC001"
NAME = "size-differs-from-recommendation"


def matching(pod: PodSpec, proposals: Sequence[Proposal]) -> list[Proposal]:
    """The proposals whose workload is the object ``pod`` belongs to."""
    o = pod.obj
    return [p for p in proposals if p.matches(o.kind, o.name, o.namespace)]


def _fix(title: str, changes: tuple[Change, ...], edits: tuple[Edit, ...] | None) -> Fix:
    if not edits:
        return Fix(title, "", changes, (), Applicability.DISPLAY_ONLY)
    return Fix(title, "", changes, edits, Applicability.SAFE)


def _size_violations(
    pod: PodSpec, v: Volume, size: int, who: str, annotate: bool
) -> Iterator[Violation]:
    """``sizeLimit`` of the memory emptyDir ``v`` set to ``size``."""
    quantity = format_k8s_quantity(size)
    change = (Change(Setting.SHM_SIZE, size, ("kubernetes",)),)
    node = v.size_limit
    title = f"{who}: /dev/shm sizeLimit of volume {v.name!r}"
    if isinstance(node, YScalar):
        if quantity_bytes(node) != size:
            edit = _replace(pod, node, quantity)
            yield Violation(
                f"{title} {node.value} -> {quantity}",
                node.location(),
                edit_fix(f"Set sizeLimit to {quantity}", "", change, edit),
            )
    elif isinstance(v.empty_dir, YMap) and v.empty_dir.node.value:
        edit = add_size_limit(pod, v.empty_dir, size)
        yield Violation(
            f"{title}: none -> {quantity}",
            v.empty_dir.location(),
            edit_fix(f"Add sizeLimit {quantity}", "", change, edit),
        )
    else:  # `emptyDir: {medium: Memory}` in flow style is a YMap too; `{}`/null is not memory
        yield Violation(
            f"{title}: none -> {quantity}", v.node.location(), _fix(title, change, None)
        )
    ann = pod.annotations.get(ANNOTATIONS["shm-size"])
    if annotate and isinstance(ann, YScalar) and _annotated_bytes(ann) != size:
        edit = _replace(pod, ann, quantity)
        yield Violation(
            f"{who}: annotation {ANNOTATIONS['shm-size']} {ann.value} -> {quantity}",
            ann.location(),
            edit_fix(f"Set {ANNOTATIONS['shm-size']} to {quantity}", "", change, edit),
        )


def _annotated_bytes(node: YScalar) -> int | None:
    """The bytes of a ``shmguard.io/shm-size`` scalar as check --fix and the webhook read it
    (:func:`~shmguard.units.parse_size_annotation`: ``2g`` is 2 GiB, as ``2Gi``), or None for
    a placeholder or a value that does not parse."""
    if node.placeholder:
        return None
    try:
        return parse_size_annotation(node.value)
    except SizeError:
        return None


def _shm(unit: Unit, c: Container, size: int, who: str) -> Iterator[Violation]:
    pod = unit.pod
    assert pod is not None
    mount = next((m for m in c.volume_mounts if is_dev_shm(text(m.mount_path))), None)
    quantity = format_k8s_quantity(size)
    if mount is None:
        change = (Change(Setting.SHM_MOUNT, size, ("kubernetes",)),)
        edits = shm_mount_edits(pod, c, size)
        yield Violation(
            f"{who}: no /dev/shm -> a memory-backed emptyDir of {quantity} at /dev/shm",
            c.node.location(),
            _fix(f"Mount a {quantity} memory-backed emptyDir at /dev/shm", change, edits),
        )
        return
    vol = next((v for v in pod.volumes if v.name is not None and v.name == mount.name), None)
    if vol is None or vol.empty_dir is None or text(vol.medium) != "Memory":
        what = "no volume of the pod" if vol is None else "not a memory-backed emptyDir"
        change = (Change(Setting.SHM_SIZE, size, ("kubernetes",)),)
        yield Violation(
            f"{who}: /dev/shm is volume {mount.name!r}, {what}: give it a memory-backed "
            f"emptyDir (medium: Memory) with a sizeLimit of {quantity} by hand",
            mount.node.location(),
            _fix(f"Make /dev/shm a {quantity} memory-backed emptyDir", change, None),
        )
        return
    yield from _size_violations(pod, vol, size, who, annotate=True)


def _replace(pod: PodSpec, node: YScalar, new: str) -> Edit | None:
    """``replace_scalar``, or None for a placeholder or text used elsewhere too (an anchor
    another object or place aliases: the edit would change that one as well). A number in a
    JSON file (``"memory": 1073741824``) becomes a JSON string (``"3Gi"``)."""
    if node.placeholder or not placeable(pod, node):
        return None
    if node.style == "plain" and not new.isdigit() and json_text(node.src):
        new = json.dumps(new)
    return replace_scalar(node, new)


def set_memory_limit(pod: PodSpec, c: Container, limit: int, who: str) -> Violation | None:
    """The finding that sets container ``c`` (of ``pod``)'s ``resources.limits.memory`` to
    ``limit`` bytes, or None when it needs no change.

    A limit at or above ``limit`` is kept (recommend never cuts a memory limit: the exporter
    does not see the job's non-shm use), and so is a container whose ``requests.memory`` is
    above ``limit`` (a request above the limit is invalid; shown, not applied). A request
    equal to the old limit is raised with it (:func:`~shmguard.fix.k8s.raised_request`: a
    Guaranteed pod stays Guaranteed). A missing
    ``resources``, ``limits`` or ``memory`` key is added in the file's style.
    """
    quantity = format_k8s_quantity(limit)
    node = c.memory_limit
    now = quantity_bytes(node)
    if now is not None and now >= limit:
        return None
    change = (Change(Setting.MEMORY_LIMIT, limit, ("kubernetes",)),)
    title = f"Set the memory limit of {c.name!r} to {quantity}"
    was = node.value if isinstance(node, YScalar) else "none"
    message = f"{who}: memory limit {was} -> {quantity}"
    request = quantity_bytes(c.memory_request)
    if request is not None and request > limit:
        message += (
            f" (not applied: requests.memory {format_iec(request)} is above it; set both by hand)"
        )
        return Violation(message, c.node.location(), _fix(title, change, None))
    edit: Edit | None = None
    if isinstance(node, YScalar):
        edit = _replace(pod, node, quantity)
    elif node is None:
        edit = _add_limit(pod, c, quantity)
    if edit is not None and raised_request(now, request, limit) is not None:
        # requests.memory equals the limit (Guaranteed QoS): it rises with it, or nothing
        # is applied (the limit alone would make the pod Burstable)
        message += " (requests.memory with it)"
        req = c.memory_request
        both = _replace(pod, req, quantity) if isinstance(req, YScalar) else None
        edits = (edit, both) if both is not None else None
        return Violation(message, c.node.location(), _fix(title, change, edits))
    return Violation(message, c.node.location(), edit_fix(title, "", change, edit))


def _add_limit(pod: PodSpec, c: Container, quantity: str) -> Edit | None:
    """Add ``memory: quantity`` under the container's ``resources.limits`` (each missing key
    made, a null one filled: Helm renders an empty value as ``resources:``), in block or flow
    style as the mapping it goes into is written."""
    path: tuple[str, ...] = ("resources", "limits", "memory")
    parent: YMap = c.node
    for i, key in enumerate(path):
        child = parent.get(key)
        if child is None or isinstance(child, YScalar):
            if not placeable(pod, parent):
                return None
            value: Value = quantity
            for k in reversed(path[i + 1 :]):
                value = {k: value}
            if child is not None:
                return fill_null(parent, key, value)
            return add_entry(parent, key, value, Style())
        if not isinstance(child, YMap):
            return None
        parent = child
    return None


#: Said of a change whose text cannot be placed exactly (check --fix's helpers give no edit).
NOT_PLACED = (
    " (not applied: the text there cannot be edited exactly: an anchor, an alias, a template "
    "placeholder or a block scalar; set it by hand)"
)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Each difference between ``unit``'s pod spec and the proposals for its object; a
    change that cannot be applied says why."""
    for v in _differences(unit, options):
        if v.fix is not None and not v.fix.edits and "by hand" not in v.message:
            v = Violation(v.message + NOT_PLACED, v.location, v.fix)
        yield v


def _differences(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    pod = unit.pod
    if pod is None or not options.proposals:
        return
    found = matching(pod, options.proposals)
    if not found:
        return
    by_name = {c.name: c for c in pod.containers if c.name}
    sizes = [s for p in found if (s := p.value(Setting.SHM_SIZE)) is not None]
    # one emptyDir serves the pod's containers: it takes the largest proposal for them; never
    # one at or below the runtimes' 64 MiB default, which no fix writes (issue 21: such a size
    # is no sizing, and SHM001 reports it): the next clean size above it instead
    size = max(max(sizes), ABOVE_DEFAULT) if sizes else None
    for p in found:
        who = p.label or f"{p.kind}/{p.name}"
        if not p.container:
            vol = next((v for v in pod.volumes if v.name == p.volume), None)
            if size is None or vol is None:
                continue
            # recommend's labels name the volume already: "ml/Deployment/train (dshm)"
            who = who if p.label else f"{who} ({p.volume})"
            if vol.empty_dir is not None and text(vol.medium) == "Memory":
                yield from _size_violations(pod, vol, size, who, False)
                continue
            # the exporter saw a memory-backed volume of that name; this file's is not one
            quantity = format_k8s_quantity(size)
            yield Violation(
                f"{who}: volume {p.volume!r} is not a memory-backed emptyDir in "
                f"this file: give it medium: Memory and a sizeLimit of {quantity} by hand",
                vol.node.location(),
                _fix(
                    f"Make volume {p.volume!r} a {quantity} memory-backed emptyDir",
                    (Change(Setting.SHM_SIZE, size, ("kubernetes",)),),
                    None,
                ),
            )
            continue
        c = by_name.get(p.container)
        if c is None:
            continue
        who = f"{who} container {p.container!r}"
        if size is not None:
            yield from _shm(unit, c, size, who)
        limit = p.value(Setting.MEMORY_LIMIT)
        if limit is not None:
            v = set_memory_limit(pod, c, limit, who)
            if v is not None:
                yield v


DOC = RuleDoc(
    what="A workload's /dev/shm size or memory limit differs from `shmguard recommend`'s "
    "proposal for it (only `recommend --manifests` runs this rule).",
    why="The proposal is the peak the workload reached in Prometheus's history, through the "
    "sizing policy.",
    example="",
    fix="The emptyDir's sizeLimit (and mount) and the memory limit set to the proposal.",
    fix_safety="Safe: the user asked for these sizes by running recommend --manifests --fix.",
)

RULE: Rule[Unit, CheckOptions] = Rule(
    code=CODE,
    name=NAME,
    summary="A /dev/shm size or memory limit that differs from recommend's proposal",
    severity=Severity.INFO,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes",),
    why="recommend proposes another size from the workload's history.",
    doc=DOC,
    check=check,
)


@dataclass(frozen=True)
class ManifestResult:
    """What applying proposals to one manifest file gave.

    Attributes:
        path: the file; data: its bytes after the edits (the input when nothing changed).
        matched: the proposals whose object (and container, or volume) the file holds.
        applied: the messages of the changes made, in the order made.
        not_applied: the messages of the changes shown but not made (their text cannot be
            placed exactly, or must be made by hand).
        left: the SHM findings ``check`` still reports in the matched objects after the edits
            (``CODE message``).
        diagnostics: what could not be read in the file, or was skipped on purpose (an
            unrendered template: ``info``), as ``check`` reports them.
    """

    path: str
    data: bytes
    matched: tuple[Proposal, ...]
    applied: tuple[str, ...]
    not_applied: tuple[str, ...]
    left: tuple[str, ...]
    diagnostics: tuple[SourceDiagnostic, ...] = ()


def apply_proposals(
    data: bytes,
    path: str,
    proposals: Sequence[Proposal],
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
) -> ManifestResult:
    """Apply ``proposals`` to the manifest bytes ``data`` (``path`` names it) with
    :func:`~shmguard.lint.check.fix_file` and :data:`RULE`; then run ``check``'s SHM rules on
    the result (with ``config``'s selection and user checks, as ``check`` would). Writing is
    the caller's (:func:`~shmguard.lint.check.write_atomic`)."""
    from dataclasses import replace

    from shmguard.lint.check import check_loaded, units
    from shmguard.sources.load import load_bytes

    base = options or CheckOptions()
    opts = replace(base, proposals=tuple(proposals))
    fr: FixResult = fix_file(data, path, opts, rules=(RULE,), unsafe=False)
    lf = load_bytes(fr.data, path)
    matched: dict[Proposal, None] = {}
    spans: list[tuple[int, int]] = []
    for unit in units(lf):
        if unit.pod is None:
            continue
        found = matching(unit.pod, proposals)
        containers = {c.name for c in unit.pod.containers}
        volumes = {v.name for v in unit.pod.volumes}
        for p in found:
            if (p.container in containers) if p.container else (p.volume in volumes):
                matched[p] = None
        if found:
            spans.append((unit.pod.obj.node.start, unit.pod.obj.node.end))
    left = []
    checked = check_loaded(lf, base, config=config)
    for f in checked.findings:
        at = f.location.start if f.location is not None else None
        if at is not None and any(a <= at < b for a, b in spans):
            left.append(f"{f.code} {f.message}")
    return ManifestResult(
        path,
        fr.data,
        tuple(matched),
        tuple(f.message for f in fr.applied),
        tuple(f.message for f in fr.remaining.findings),
        tuple(left),
        checked.diagnostics,
    )

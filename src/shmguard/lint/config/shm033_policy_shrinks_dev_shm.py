"""SHM033 policy-shrinks-dev-shm: an admission policy in the repository that gives every
emptyDir a small sizeLimit, /dev/shm's memory emptyDir included, or caps it below the size
/dev/shm needs.

* Kyverno's library policy ``add-emptydir-sizelimit`` (kyverno/policies
  ``other/add-emptydir-sizelimit``) mutates each Pod volume that has an ``emptyDir`` and no
  ``sizeLimit`` with a JSON patch adding ``sizeLimit: 100Mi``: a dshm ``{medium: Memory}``
  becomes a 100 MiB /dev/shm, behind the manifests' back. Its preconditions test only that the
  volume has an emptyDir.
* The constraint template ``K8sEmptyDirHasSizeLimit`` (Policy Controller's template library;
  parameters ``maxSizeLimit``, ``exemptVolumesRegex``) rejects a Pod whose emptyDir has no
  sizeLimit or one above ``maxSizeLimit``: a 1Gi dshm under ``maxSizeLimit: 100Mi`` is denied.

Reported when the size is below the sizing policy's /dev/shm size (1 GiB unless configured)
and nothing in the policy leaves memory-backed volumes alone (a precondition or exemption that
names ``medium``/``Memory``, ``shm`` or the volume). The message names the workloads of the
same file or stream that the policy would shrink or reject (ML containers with a memory
emptyDir at /dev/shm); other files' workloads are not known to a per-file rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.fix.yamledit import Style, add_item
from shmguard.lint.config._base import CheckOptions, Unit, fix_bytes, fix_sized, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.sources.k8s import K8sObject
from shmguard.sources.yamlnode import YMap, YScalar, YSeq
from shmguard.units import SizeError, format_iec, format_k8s_quantity, k8s_quantity_bytes

#: A JSON patch value for an emptyDir sizeLimit (``path: .../emptyDir/sizeLimit``, then
#: ``value: 100Mi``), in the patch text.
_PATCH = re.compile(
    r"emptyDir/sizeLimit[\"']?\s*(?:\n[^\n]*?)*?\bvalue:\s*[\"']?([0-9.]+[A-Za-z]*)", re.M
)
#: Words that show a policy already leaves /dev/shm's memory volumes alone.
_EXEMPT = re.compile(r"medium|Memory|shm", re.I)
_EXCLUDE = (
    "\"{{element.emptyDir.medium || ''}}\"",
    "NotEquals",
    "Memory",
)


def _kyverno(obj: K8sObject) -> bool:
    return obj.group == "kyverno.io" and obj.kind in ("ClusterPolicy", "Policy")


def _gatekeeper(obj: K8sObject) -> bool:
    return obj.group == "constraints.gatekeeper.sh" and obj.kind == "K8sEmptyDirHasSizeLimit"


def is_policy(obj: K8sObject) -> bool:
    """Whether ``obj`` is a policy this rule reads."""
    return _kyverno(obj) or _gatekeeper(obj)


def _bytes(text: str) -> int | None:
    try:
        return k8s_quantity_bytes(text)
    except SizeError:
        return None


def _victims(unit: Unit) -> str:
    names = [f"{kind} {name}" for kind, name in unit.victims]
    if not names:
        return ""
    return "; in this file it would shrink " + ", ".join(names)


def _kyverno_rules(unit: Unit, obj: K8sObject, want: int) -> Iterator[Violation]:
    rules = obj.node.get("spec")
    rules = rules.get("rules") if isinstance(rules, YMap) else None
    for rule in rules.items if isinstance(rules, YSeq) else []:
        mutate = rule.get("mutate") if isinstance(rule, YMap) else None
        if not isinstance(mutate, YMap) or _EXEMPT.search(mutate.raw):
            continue
        m = _PATCH.search(mutate.raw)
        size = _bytes(m.group(1)) if m else None
        if m is None or size is None or size >= want:
            continue
        name = rule.get("name") if isinstance(rule, YMap) else None
        label = f" rule {name.value!r}" if isinstance(name, YScalar) else ""
        yield Violation(
            f"{obj.kind} {obj.name or ''}{label} gives every emptyDir without a sizeLimit "
            f"{m.group(1)} ({format_iec(size)}), /dev/shm's memory emptyDir too: below the "
            f"{format_iec(want)} /dev/shm size{_victims(unit)}".replace("  ", " "),
            (name if isinstance(name, YScalar) else rule).location(),
            _kyverno_fix(mutate),
        )


def _kyverno_fix(mutate: YMap) -> Fix:
    title = "Leave memory-backed emptyDirs alone"
    text = (
        "Add the precondition `{key: \"{{element.emptyDir.medium || ''}}\", operator: "
        "NotEquals, value: Memory}` so the policy bounds only disk-backed emptyDirs (a memory "
        "emptyDir is charged to the container's memory limit already)."
    )
    foreach = mutate.get("foreach")
    first = foreach.items[0] if isinstance(foreach, YSeq) and len(foreach) == 1 else None
    pre = first.get("preconditions") if isinstance(first, YMap) else None
    cond = pre.get("all") if isinstance(pre, YMap) else None
    edit = None
    if isinstance(cond, YSeq) and not cond.shared:
        key, op, value = _EXCLUDE
        edit = add_item(cond, {"key": key, "operator": op, "value": value}, Style())
    if edit is None:
        return Fix(title, text)
    return Fix(title, text, (), (edit,), Applicability.UNSAFE)


def _gatekeeper_check(unit: Unit, obj: K8sObject, want: int) -> Iterator[Violation]:
    spec = obj.node.get("spec")
    params = spec.get("parameters") if isinstance(spec, YMap) else None
    if not isinstance(params, YMap):
        return
    cap = params.get("maxSizeLimit")
    exempt = params.get("exemptVolumesRegex")
    if exempt is not None and _EXEMPT.search(exempt.raw):
        return
    size = _bytes(cap.value) if isinstance(cap, YScalar) and not cap.placeholder else None
    if size is None or size >= want or not isinstance(cap, YScalar):
        return
    from shmguard.lint.config._base import replace_scalar

    new = format_k8s_quantity(want)
    yield Violation(
        f"{obj.kind} {obj.name or ''} rejects a pod whose emptyDir sizeLimit is above "
        f"{cap.value} ({format_iec(size)}), /dev/shm's memory emptyDir too: below the "
        f"{format_iec(want)} /dev/shm size{_victims(unit)}".replace("  ", " "),
        cap.location(),
        Fix(
            f"Raise maxSizeLimit to {new}",
            f"Raise `maxSizeLimit` to {new} (the /dev/shm size), or exempt the /dev/shm "
            'volumes: `exemptVolumesRegex: ["^dshm$"]`.',
            (),
            (e,) if (e := replace_scalar(cap, new)) is not None else (),
            Applicability.UNSAFE,
        ),
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a Kyverno policy that sizes every emptyDir below /dev/shm's size, and a
    K8sEmptyDirHasSizeLimit constraint whose maxSizeLimit is below it."""
    obj = unit.policy
    if obj is None:
        return
    want = fix_bytes(fix_sized(options, unit.workload, None))
    if want is None:
        return
    if _kyverno(obj):
        yield from _kyverno_rules(unit, obj, want)
    elif _gatekeeper(obj):
        yield from _gatekeeper_check(unit, obj, want)


DOC = RuleDoc(
    what=f"""\
An admission policy in the files checked that would shrink or forbid /dev/shm: a Kyverno
`ClusterPolicy`/`Policy` whose mutate rule gives every emptyDir without a `sizeLimit` a size
below the /dev/shm size (the sizing policy's, 1 GiB by default), as the Kyverno library's
`add-emptydir-sizelimit` does with 100Mi (kyverno/policies `other/add-emptydir-sizelimit`: its
preconditions test only that the volume is an emptyDir, so a dshm `{{medium: Memory}}` gets
100Mi); and a `K8sEmptyDirHasSizeLimit` constraint (Policy Controller's constraint template
library) whose `maxSizeLimit` is below that size, which rejects the pod. Not flagged when the
policy names memory volumes or /dev/shm (a precondition on `medium`, an `exemptVolumesRegex`
that matches `shm`). The finding names the workloads of the same file or stream (`helm
template | shmguard check -`) that mount a memory emptyDir at /dev/shm.
Sources: {sources("kubernetes-policy")};
the Kyverno policy library and the Policy Controller constraint template library.
""",
    why="""\
The manifests look right (`emptyDir: {medium: Memory}` at /dev/shm, sized to the memory limit by
the kubelet), but the cluster's policy rewrites them at admission: every training pod gets a
100 MiB /dev/shm and its DataLoader workers die with a Bus error, or the pod is rejected, and
nothing in the workload's own files says why.""",
    fix="""\
Kyverno: add a precondition that leaves memory-backed emptyDirs alone,
`{key: "{{element.emptyDir.medium || ''}}", operator: NotEquals, value: Memory}` (their pages are
charged to the memory limit already). Gatekeeper: raise `maxSizeLimit` to the /dev/shm size, or
exempt the /dev/shm volumes with `exemptVolumesRegex`.
""",
    fix_safety="""\
Unsafe (`--unsafe-fixes`): the policy governs every pod of the cluster, which the files checked
do not show. The Kyverno fix adds one precondition to the rule's `foreach` (when it has a single
`foreach` with `preconditions.all`; else it is shown only); the Gatekeeper fix rewrites
`maxSizeLimit` in place.""",
    applies="unsafe",
    bad=Example(
        "policy.yaml",
        """\
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: add-emptydir-sizelimit
spec:
  rules:
  - name: mutate-emptydir
    match:
      any:
      - resources:
          kinds:
          - Pod
    mutate:
      foreach:
      - list: "request.object.spec.volumes[]"
        preconditions:
          all:
          - key: "{{element.keys(@)}}"
            operator: AnyIn
            value: emptyDir
          - key: "{{element.emptyDir.sizeLimit || ''}}"
            operator: Equals
            value: ''
        patchesJson6902: |-
          - path: "/spec/volumes/{{elementIndex}}/emptyDir/sizeLimit"
            op: add
            value: 100Mi
""",
    ),
    good=Example(
        "policy.yaml",
        """\
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: add-emptydir-sizelimit
spec:
  rules:
  - name: mutate-emptydir
    match:
      any:
      - resources:
          kinds:
          - Pod
    mutate:
      foreach:
      - list: "request.object.spec.volumes[]"
        preconditions:
          all:
          - key: "{{element.keys(@)}}"
            operator: AnyIn
            value: emptyDir
          - key: "{{element.emptyDir.sizeLimit || ''}}"
            operator: Equals
            value: ''
          - key: "{{element.emptyDir.medium || ''}}"
            operator: NotEquals
            value: Memory
        patchesJson6902: |-
          - path: "/spec/volumes/{{elementIndex}}/emptyDir/sizeLimit"
            op: add
            value: 100Mi
""",
    ),
)

RULE = Rule(
    code="SHM033",
    name="policy-shrinks-dev-shm",
    summary="An admission policy that sizes /dev/shm's emptyDir below its size, or rejects it",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("kubernetes-policy",),
    why=(
        "A Kyverno policy adding a 100Mi sizeLimit to every emptyDir, or a Gatekeeper "
        "maxSizeLimit, shrinks or rejects the memory emptyDir at /dev/shm behind the manifests."
    ),
    doc=DOC,
    check=check,
)

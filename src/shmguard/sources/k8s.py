"""Kubernetes manifests: the objects of every document and the pod specs inside them.

Reads multi-document files, ``kind: List`` (and ``*List``, as ``kubectl get -o yaml`` prints)
and finds the pod spec(s) of every workload kind listed in
:mod:`~shmguard.sources.k8s_kinds`, plus three shapes handled in code:

* KServe InferenceService: ``spec.predictor`` (and ``transformer``/``explainer``) *is* an
  inline PodSpec whose main container may be ``model`` or a framework key
  (kserve ``pkg/apis/serving/v1beta1/predictor.go``), and ``workerSpec`` another PodSpec.
* Argo Workflow/WorkflowTemplate/ClusterWorkflowTemplate/CronWorkflow: each template with a
  ``container``/``script``/``containerSet`` is one pod, with workflow- and template-level
  ``volumes`` (argo-workflows ``pkg/apis/workflow/v1alpha1/workflow_types.go``).
* Kubeflow Trainer v2 TrainJob: the containers come from the referenced (Cluster)
  TrainingRuntime (``spec.runtimeRef``); the TrainJob's own ``spec.trainer`` (image, command,
  env, ``resourcesPerNode``) becomes one container and ``spec.podTemplateOverrides[].spec``
  (older: ``podSpecOverrides``) the volumes, and the pod spec carries the note
  ``trainjob-runtime:<name>`` (lint_traps.md: the default ``torch-distributed`` runtime mounts
  no /dev/shm).

Objects of other kinds are searched for mappings with a ``containers`` list of mappings (a
fallback for CRDs not in the table; :attr:`PodSpec.known` is then False).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import yaml

from shmguard.sources.k8s_kinds import (
    CONTAINER_KEYS,
    EMBEDDED_OBJECTS,
    NOT_WORKLOADS,
    POD_SPEC_PATHS,
    is_builtin_group,
)
from shmguard.sources.k8s_model import Container, Volume, dig, seq_maps, text
from shmguard.sources.yamlload import YamlFile
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq, walk

_ARGO_KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
_KSERVE_COMPONENTS = ("predictor", "transformer", "explainer")


@dataclass(frozen=True)
class K8sObject:
    """One Kubernetes object (a document, or an item of a List).

    Attributes:
        doc: 0-based document index in the file; node: the object's mapping.
        api_version, kind, name, namespace: from the object (name/namespace None when absent).
        annotations, labels: ``metadata.annotations`` / ``metadata.labels`` key -> value node.
        doc_root: the composed root node of the object's document: the items of a List can
            alias each other's anchors, so whether an object's text is used elsewhere is known
            only there (None: the object's own node).
    """

    doc: int
    node: YMap
    api_version: str
    kind: str
    name: str | None
    namespace: str | None
    annotations: dict[str, YNode]
    labels: dict[str, YNode]
    doc_root: yaml.Node | None = None

    @property
    def group(self) -> str:
        """The API group: ``apps`` for ``apps/v1``, "" for the core ``v1``."""
        return self.api_version.rpartition("/")[0]


@dataclass(frozen=True)
class PodSpec:
    """A pod spec found in an object.

    Attributes:
        obj: the object it belongs to; node: the pod spec mapping.
        role: which pod of the workload: "" for the only one, else e.g. ``Worker``,
            ``workerGroupSpecs[0]``, ``templates[2]`` (the wildcard parts of its path).
        containers, init_containers, volumes: views (Argo and TrainJob gather them).
        host_ipc: ``hostIPC``; sysctls: ``securityContext.sysctls`` entries.
        annotations, labels: the object's, updated by the pod template's (template wins).
        notes: facts later rules need: ``kuberay`` (the operator injects /dev/shm into the Ray
            container), ``mpi-launcher``, ``trainjob-runtime:<name>``.
        known: False when found by the fallback search.
    """

    obj: K8sObject
    node: YMap
    role: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    volumes: tuple[Volume, ...]
    host_ipc: YNode | None
    sysctls: tuple[YMap, ...]
    annotations: dict[str, YNode] = field(default_factory=dict)
    labels: dict[str, YNode] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    known: bool = True

    @property
    def path(self) -> str:
        """The YAML path of the pod spec."""
        return self.node.path


def _meta(node: YNode | None, key: str) -> dict[str, YNode]:
    m = dig(node, key)
    return m.value_map() if isinstance(m, YMap) else {}


def objects(yf: YamlFile) -> Iterator[K8sObject]:
    """Every object with ``apiVersion`` and ``kind`` in the file, List items expanded, except
    those whose controller is in the same file.

    ``kubectl get all -o yaml`` lists a Deployment, the ReplicaSet it made and that
    ReplicaSet's Pods, each with the same pod template: checked alone, one missing /dev/shm
    was reported three times. An object with an ``ownerReferences`` entry with
    ``controller: true`` naming an object of the file (by ``uid``, else by kind and name in
    the same namespace) is left to its controller, the object people write (as ``check
    --cluster`` does; Kubernetes' garbage collector docs describe the owner references:
    https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/).
    """
    found = [o for d in yf.documents if isinstance(d.root, YMap) for o in _objects(d.index, d.root)]
    owned = [(o, controller(o)) for o in found]
    if not any(ref for _, ref in owned):
        yield from found
        return
    uids = {text(dig(o.node, "metadata", "uid")) for o in found} - {None}
    names = {(o.namespace, o.kind, o.name) for o in found}
    for o, ref in owned:
        if ref is not None:
            uid, kind, name = ref
            if (uid is not None and uid in uids) or (o.namespace, kind, name) in names:
                continue
        yield o


def controller(obj: K8sObject) -> tuple[str | None, str | None, str | None] | None:
    """(uid, kind, name) of the object's controller owner reference, or None."""
    for ref in seq_maps(dig(obj.node, "metadata", "ownerReferences")):
        if text(ref.get("controller")) in ("true", "True"):
            return text(ref.get("uid")), text(ref.get("kind")), text(ref.get("name"))
    return None


def _objects(doc: int, node: YMap, root: yaml.Node | None = None) -> Iterator[K8sObject]:
    kind, api = text(node.get("kind")), text(node.get("apiVersion"))
    if kind is None or api is None:
        return
    root = node.node if root is None else root
    if kind.endswith("List") and isinstance(node.get("items"), YSeq):
        for item in seq_maps(node.get("items")):
            yield from _objects(doc, item, root)
        return
    md = node.get("metadata")
    yield K8sObject(
        doc,
        node,
        api,
        kind,
        text(dig(md, "name")) or text(dig(md, "generateName")),
        text(dig(md, "namespace")),
        _meta(md, "annotations"),
        _meta(md, "labels"),
        root,
    )


def _match(node: YNode | None, segs: list[str], role: list[str]) -> Iterator[tuple[YMap, str]]:
    if node is None:
        return
    if not segs:
        if isinstance(node, YMap):
            yield node, ".".join(role)
        return
    seg, rest = segs[0], segs[1:]
    if seg == "*" and isinstance(node, YMap):
        for k, (_, v) in node.entries.items():
            yield from _match(v, rest, [*role, k])
    elif seg.endswith("[]"):
        seq = dig(node, seg[:-2]) if seg[:-2] else node
        if isinstance(seq, YSeq):
            for i, item in enumerate(seq.items):
                yield from _match(item, rest, [*role, f"{seg[:-2]}[{i}]"])
    elif isinstance(node, YMap):
        yield from _match(node.get(seg), rest, role)


def pod_specs(obj: K8sObject) -> Iterator[PodSpec]:
    """Every pod spec of ``obj`` (none for a kind that has none, such as a Service)."""
    key = (obj.group.split("/")[0], obj.kind)
    root = obj.node
    if key in EMBEDDED_OBJECTS:
        inner = dig(root, *EMBEDDED_OBJECTS[key].split("."))
        if isinstance(inner, YMap):
            for sub in _objects(obj.doc, inner, obj.doc_root):
                yield from pod_specs(sub)
        return
    if obj.group.startswith("argoproj.io") and obj.kind in _ARGO_KINDS:
        yield from _argo(obj)
        return
    if obj.group.startswith("serving.kserve.io") and obj.kind == "InferenceService":
        for comp in _KSERVE_COMPONENTS:
            for path in (f"spec.{comp}", f"spec.{comp}.workerSpec"):
                node = dig(root, *path.split("."))
                if isinstance(node, YMap):
                    yield _pod(obj, node, path.removeprefix("spec."))
        return
    if obj.group.startswith("trainer.kubeflow.org") and obj.kind == "TrainJob":
        yield _trainjob(obj)
        return
    patterns = POD_SPEC_PATHS.get(key)
    if patterns is None:
        if obj.kind not in NOT_WORKLOADS and not is_builtin_group(key[0]):
            yield from _fallback(obj)
        return
    for pattern in patterns:
        for node, _ in _match(root, pattern.split("."), []):
            yield _pod(obj, node, _role(node.path), _template_meta(root, node))


def _role(path: str) -> str:
    """``spec.pytorchReplicaSpecs.Worker.template.spec`` -> ``pytorchReplicaSpecs.Worker``;
    "" for the only pod of a Pod or Deployment."""
    while path.endswith((".template.spec", ".spec")):
        path = path[: -len(".template.spec" if path.endswith(".template.spec") else ".spec")]
    path = path.removeprefix("spec.")
    return "" if path in ("spec", "spec.template", "template") else path


def _template_meta(root: YMap, spec: YMap) -> YNode | None:
    """The ``metadata`` beside a pod template's ``spec`` (found through the path)."""
    parent = spec.path.rpartition(".")[0]
    if not spec.path.endswith(".spec") or not parent:
        return None
    if root.path and parent.startswith(root.path + "."):
        parent = parent[len(root.path) + 1 :]  # an item of a List: the path starts at items[i]
    node: YNode | None = root
    for part in _split(parent):
        node = dig(node, part) if isinstance(part, str) else _index(node, part)
    return dig(node, "metadata")


def _split(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in path.split("."):
        name, _, idx = part.partition("[")
        if name:
            out.append(name)
        if idx:
            out.append(int(idx.rstrip("]")))
    return out


def _index(node: YNode | None, i: int) -> YNode | None:
    return node.items[i] if isinstance(node, YSeq) and i < len(node) else None


def _pod(
    obj: K8sObject,
    node: YMap,
    role: str,
    tmeta: YNode | None = None,
    *,
    extra: tuple[Container, ...] = (),
    volumes: tuple[Volume, ...] = (),
    notes: tuple[str, ...] = (),
    known: bool = True,
) -> PodSpec:
    containers = [Container.of(c) for c in seq_maps(node.get("containers"))]
    containers += [
        Container.of(c)
        for k in CONTAINER_KEYS
        if k in node and isinstance(c := node.get(k), YMap)  # (`in`: no view kept for a miss)
    ]
    if obj.group.startswith("ray.io"):
        notes += ("kuberay",)
    if obj.kind == "MPIJob" and role.lower().endswith("launcher"):
        notes += ("mpi-launcher",)
    return PodSpec(
        obj=obj,
        node=node,
        role=role,
        containers=(*extra, *containers),
        init_containers=tuple(
            Container.of(c, init=True) for c in seq_maps(node.get("initContainers"))
        ),
        volumes=(*volumes, *(Volume.of(v) for v in seq_maps(node.get("volumes")))),
        host_ipc=node.get("hostIPC"),
        sysctls=tuple(seq_maps(dig(node, "securityContext", "sysctls"))),
        annotations={**obj.annotations, **_meta(tmeta, "annotations")},
        labels={**obj.labels, **_meta(tmeta, "labels")},
        notes=notes,
        known=known,
    )


def _argo(obj: K8sObject) -> Iterator[PodSpec]:
    spec = obj.node.get("spec")
    if obj.kind == "CronWorkflow":
        spec = dig(spec, "workflowSpec")
    if not isinstance(spec, YMap):
        return
    wf_volumes = tuple(Volume.of(v) for v in seq_maps(spec.get("volumes")))
    for i, tpl in enumerate(seq_maps(spec.get("templates"))):
        main = [c for k in ("container", "script") if isinstance(c := tpl.get(k), YMap)]
        main += seq_maps(dig(tpl, "containerSet", "containers"))
        if not main:
            continue
        extra = tuple(Container.of(c) for c in (*main, *seq_maps(tpl.get("sidecars"))))
        yield _pod(obj, tpl, f"templates[{i}]", tpl, extra=extra, volumes=wf_volumes)


def _trainjob(obj: K8sObject) -> PodSpec:
    spec = obj.node.get("spec")
    trainer = dig(spec, "trainer")
    runtime = text(dig(spec, "runtimeRef", "name")) or "?"
    extra: tuple[Container, ...] = ()
    if isinstance(trainer, YMap):
        extra = (Container.of(trainer, resources_key="resourcesPerNode"),)
    volumes: list[Volume] = []
    for key in ("podTemplateOverrides", "podSpecOverrides"):
        for ov in seq_maps(dig(spec, key)):
            pod = ov.get("spec") if key == "podTemplateOverrides" else ov
            volumes += [Volume.of(v) for v in seq_maps(dig(pod, "volumes"))]
    node = spec if isinstance(spec, YMap) else obj.node
    return PodSpec(
        obj=obj,
        node=node,
        role="trainer",
        containers=extra,
        init_containers=(),
        volumes=tuple(volumes),
        host_ipc=None,
        sysctls=(),
        annotations=dict(obj.annotations),
        labels=dict(obj.labels),
        notes=(f"trainjob-runtime:{runtime}",),
    )


def _has_containers_key(root: yaml.Node, limit: int) -> bool:
    """True when some mapping in ``root``'s composed graph (anchors, aliases and merge sources
    included: they are nodes of the same graph) has the scalar key ``containers`` with a
    sequence holding a mapping as its value (what :func:`_fallback` looks for; a
    CustomResourceDefinition's schema has ``containers: {type: array, ...}``), or when the
    graph has more than ``limit`` nodes (then the full walk decides, and raises). A walk over
    PyYAML's nodes, without views: most objects searched by :func:`_fallback` (Services, RBAC,
    CRs of unknown kinds) have no such key, and this costs a fraction of wrapping every node."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if len(seen) > limit:
            return True
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if (
                    isinstance(k, yaml.ScalarNode)
                    and k.value == "containers"
                    and isinstance(v, yaml.SequenceNode)
                    and any(isinstance(c, yaml.MappingNode) for c in v.value)
                ):
                    return True
                stack.append(k)
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return False


#: Most nodes :func:`_fallback` visits in one object (aliases counted at every use).
FALLBACK_NODES = 200_000


def _fallback(obj: K8sObject) -> Iterator[PodSpec]:
    """Mappings with a ``containers`` list of mappings that have an ``image`` (outermost only).

    The search stops after :data:`FALLBACK_NODES` nodes (a large CR of an unknown kind, or
    aliases expanding past it below the loader's alias-bomb limit): what was found so far is
    kept, and the file is still checked (it used to raise ``ValueError`` out of the loader).
    """
    text = obj.node.src.text
    # no key can read "containers" without those letters or a backslash escape in the file
    if ("containers" not in text and "\\" not in text) or not _has_containers_key(
        obj.node.node, FALLBACK_NODES
    ):
        return
    found: list[str] = []
    try:
        for n in walk(obj.node, limit=FALLBACK_NODES):
            if not isinstance(n, YMap) or any(n.path.startswith(p + ".") for p in found):
                continue
            cs = seq_maps(n.get("containers"))
            if cs and all(isinstance(c.get("image"), YScalar) for c in cs):
                found.append(n.path)
                yield _pod(obj, n, n.path, known=False)
    except ValueError:  # walk's node limit
        return

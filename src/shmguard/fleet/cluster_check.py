"""Lint objects read from a cluster (or a ``kubectl get -o yaml`` stream) with ``check``'s
rules, and mark the pods the shmguard webhook sizes as covered.

Each live object is written as one YAML document and loaded by the same Kubernetes source
(:func:`shmguard.sources.load.load_bytes`) and rule engine
(:func:`shmguard.lint.check.check_loaded`) as a manifest file, so the findings are the ones
``check`` gives for the same object in a file. Objects from the API have no file positions:
a finding's location is ``cluster://<context>/<namespace>/<Kind>/<name>`` (``_`` for a
cluster-scoped object) with the YAML path of the field, and no line.

A SHM001 finding (an ML container with no volume at /dev/shm) in a pod the webhook sizes
(:mod:`shmguard.fleet.coverage`) becomes an info finding that says so: the pods the
controller makes will get their /dev/shm at admission. Not in a Pod read back from the API
server: that one was admitted already, without a /dev/shm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

from shmguard.config import Config
from shmguard.fleet import names
from shmguard.fleet.coverage import WebhookView, view_from_objects
from shmguard.lint.check import CheckOptions, FileResult, check_loaded
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Finding, Location
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import dig, text
from shmguard.sources.load import LoadedFile, load_bytes

#: The words of SHM001's Kubernetes finding for a container with nothing at /dev/shm (its
#: disk-backed emptyDir variant says otherwise and is not covered).
_NO_SHM = "with no volume at /dev/shm"
#: Metadata the API server adds that says nothing about /dev/shm (and can be large).
_DROP_META = ("managedFields",)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def object_uri(context: str, obj: Mapping[str, Any]) -> str:
    """``cluster://<context>/<namespace>/<Kind>/<name>`` (``_`` for no namespace)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "_"
    return f"cluster://{context}/{ns}/{obj.get('kind')}/{meta.get('name') or '?'}"


def clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without ``status``, ``metadata.managedFields`` and kubectl's
    last-applied-configuration annotation (a JSON copy of the object, and no part of it)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    for k in _DROP_META:
        meta.pop(k, None)
    if isinstance(meta.get("annotations"), Mapping):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != _LAST_APPLIED}
    out["metadata"] = meta
    return out


def _pod_for(lf: LoadedFile, path: str | None) -> PodSpec | None:
    """The pod spec whose YAML path is the longest prefix of ``path``."""
    if path is None:
        return None
    best: PodSpec | None = None
    for pod in lf.pod_specs:
        p = pod.path
        if (path == p or path.startswith((p + ".", p + "["))) and (
            best is None or len(p) > len(best.path)
        ):
            best = pod
    return best


def _strings(nodes: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, n in nodes.items() if (v := text(n)) is not None}


def _admitted(pod: PodSpec) -> bool:
    """Whether ``pod`` is a Pod object read back from an API server (it has a ``uid``)."""
    uid = dig(pod.obj.node, "metadata", "uid")
    return pod.obj.kind == "Pod" and not pod.obj.group and uid is not None


def cover(result: FileResult, lf: LoadedFile, view: WebhookView) -> FileResult:
    """``result`` with each SHM001 no-/dev/shm finding in a pod the webhook sizes turned into
    an info finding saying it is covered (and why). A Pod read back from the API (it has a
    ``metadata.uid``) was admitted already: its finding stays a warning and says the webhook
    did not size it."""
    if not view.installed:
        return result
    out: list[Finding] = []
    for f in result.findings:
        pod = _pod_for(lf, f.location.path if f.location else None)
        why = None
        if f.code == "SHM001" and _NO_SHM in f.message and pod is not None:
            gpu = any(c.gpu is not None for c in pod.containers)
            why = view.covers(
                pod.obj.namespace, _strings(pod.annotations), _strings(pod.labels), gpu
            )
        if why is None:
            out.append(f)
            continue
        if pod is not None and _admitted(pod):
            # a Pod the API server holds went through admission already: the webhook did
            # not size it, whatever its namespace says now
            out.append(
                dataclasses.replace(
                    f,
                    message=f"{f.message}; the shmguard webhook covers it ({why}) but this pod "
                    "was admitted without a /dev/shm (created before the webhook, or the "
                    "webhook did not answer): recreate it",
                )
            )
            continue
        out.append(
            dataclasses.replace(
                f,
                severity=Severity.INFO,
                message=f"{f.message}; covered by the shmguard webhook ({why}): its pods get "
                "a sized /dev/shm at admission",
                fix=None,
            )
        )
    return dataclasses.replace(result, findings=tuple(out))


def _relocate(result: FileResult, uri: str) -> FileResult:
    """Locate the findings at ``uri`` and a field path; fixes become display-only (their
    edits are offsets into the text written for checking, not into anything a user has)."""
    found = tuple(
        dataclasses.replace(
            f,
            location=Location(file=uri, path=f.location.path if f.location else None),
            fix=dataclasses.replace(f.fix, edits=(), applicability=Applicability.DISPLAY_ONLY)
            if f.fix is not None
            else None,
        )
        for f in result.findings
    )
    diags = tuple(
        dataclasses.replace(d, file=uri, line=None, column=None) for d in result.diagnostics
    )
    return FileResult(uri, result.kind, found, diags)


def check_objects(
    objects: Iterable[Mapping[str, Any]],
    context: str,
    view: WebhookView,
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
) -> Iterator[tuple[FileResult, bytes]]:
    """``check``'s result for each object (with its ``apiVersion`` and ``kind``), located at
    :func:`object_uri`, covered findings turned to info; with the YAML text checked."""
    for obj in objects:
        uri = object_uri(context, obj)
        data = yaml.safe_dump(clean(obj), sort_keys=False, allow_unicode=True).encode()
        lf = load_bytes(data, uri + ".yaml")
        result = cover(check_loaded(lf, options, config=config), lf, view)
        yield _relocate(result, uri), data


def stream_view(lf: LoadedFile) -> WebhookView:
    """The webhook view found in a loaded stream (``kubectl get mutatingwebhookconfiguration,
    namespaces,deployments -A -o yaml``): empty unless it holds the shmguard configuration."""
    if lf.src is None or not any(
        o.kind == "MutatingWebhookConfiguration" and o.name == names.WEBHOOK_CONFIGURATION
        for o in lf.objects
    ):
        return WebhookView()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(lf.src.text, Loader=loader) if isinstance(d, Mapping)]
    except yaml.YAMLError:
        return WebhookView()
    return view_from_objects(_expand(docs))


def _expand(docs: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for d in docs:
        kind = d.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(d.get("items"), list):
            yield from _expand(i for i in d["items"] if isinstance(i, Mapping))
        else:
            yield d

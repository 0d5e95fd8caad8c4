"""Lint objects read from a cluster (or a ``kubectl get -o yaml`` stream) with ``check``'s
rules, and mark the pods the shmguard webhook sizes as covered.

Each live object is written as one YAML document and loaded by the same Kubernetes source
(:func:`shmguard.sources.load.load_bytes`) and rule engine
(:func:`shmguard.lint.check.check_loaded`) as a manifest file, so the findings are the ones
``check`` gives for the same object in a file. Objects from the API have no file positions:
a finding's location is ``cluster://<context>/<namespace>/<Kind>/<name>`` (``_`` for a
cluster-scoped object) with the YAML path of the field, and no line.

A SHM001 finding (an ML container with no volume at /dev/shm) in a pod the webhook sizes
(:func:`shmguard.lint.coverage.cover`, the step ``check`` runs over files too) becomes an
info finding that says so: the pods the controller makes will get their /dev/shm at
admission. Not in a Pod read back from the API
server: that one was admitted already, without a /dev/shm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

from shmguard.config import Config
from shmguard.lint.baseline import Baseline
from shmguard.lint.check import CheckOptions, FileResult, check_loaded
from shmguard.lint.check_files import Checked
from shmguard.lint.coverage import WebhookView, cover, stream_view
from shmguard.lint.report import CheckReport, report_of
from shmguard.model import FailOn
from shmguard.model.finding import Applicability, Location
from shmguard.sources.load import load_bytes

__all__ = ["check_cluster", "check_objects", "clean", "cover", "object_uri", "stream_view"]

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


def check_cluster(
    context: str | None,
    namespace: str | None,
    all_namespaces: bool,
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
    fail_on: FailOn | None = None,
    baseline: Baseline | None = None,
    create_baseline: bool = False,
) -> CheckReport:
    """``shmguard check --cluster``: the live objects of a cluster
    (:func:`~shmguard.fleet.cluster.read_cluster`) checked by :func:`check_objects`, as a
    :class:`~shmguard.lint.report.CheckReport` (the objects' YAML text as their sources, the
    reading's notes, the baseline as :func:`~shmguard.lint.report.check_paths` takes it). An
    object's diagnostics do not count as errors: the exit status is 0 or 1.

    Raises:
        ClusterError: the cluster could not be read (one line).
    """
    from shmguard.fleet.cluster import read_cluster

    snap = read_cluster(context, namespace, all_namespaces)
    found = check_objects(snap.objects, snap.context, snap.view, options, config=config)
    conf = config or Config()
    return report_of(
        (Checked(result, data) for result, data in found),
        fail_on=fail_on or conf.fail_on or FailOn.WARNING,
        baseline=baseline,
        create_baseline=create_baseline,
        config=conf.path,
        notes=snap.notes,
        errors=0,
    )

"""Load one file (or stdin) as whatever source it is, classified by content, never raising.

Order: JSON or YAML-looking text is parsed with the node layer and classified as Compose
(top-level ``services`` of mappings), Kubernetes (``apiVersion`` + ``kind``), an ECS task
definition or daemon.json; other text that mentions ``docker|podman run`` is searched for run
lines as Markdown (fences), reST (``::`` blocks), a Dockerfile (``FROM``/``RUN``) or shell
(also Makefiles). The file name is only a hint where content cannot tell (``.md`` vs ``.sh``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from shmguard.sources import gcpause
from shmguard.sources.ci import CiFile, ci_file
from shmguard.sources.compose import ComposeFile, compose_files
from shmguard.sources.devcontainer import DevContainer, is_devcontainer, load_devcontainer
from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.jsonfiles import DaemonConfig, EcsTaskDefinition, json_sources
from shmguard.sources.k8s import K8sObject, PodSpec, controller, objects, pod_specs
from shmguard.sources.quadlet import QuadletUnit, is_quadlet, load_quadlet
from shmguard.sources.read import READ_TIMEOUT, read_input
from shmguard.sources.runline import RunLine
from shmguard.sources.text import SourceText
from shmguard.sources.textsources import (
    MENTION,
    dockerfile_run_lines,
    markdown_run_lines,
    rst_run_lines,
    shell_run_lines,
)
from shmguard.sources.yamlload import Part, YamlFile, iter_documents, iter_part, load_yaml

_YAML_START = re.compile(r"\A(?:\s*#[^\n]*\n)*\s*(?:---|%YAML|[\w\"'.$/-]+\s*:(?:\s|$)|- )")
_YAML_NAMES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class LoadedFile:
    """A file read through the sources layer.

    Attributes:
        path: as given (``-`` for stdin).
        kind: ``compose``, ``kubernetes``, ``ecs``, ``daemon-json``, ``devcontainer``,
            ``github-actions``, ``gitlab-ci``, ``quadlet``, ``run-lines``, ``yaml`` (YAML of
            no known kind), ``text`` (nothing found) or ``error``.
        src: the text (None when it could not be decoded); yaml: the parsed YAML, if any.
        compose, objects, pod_specs, run_lines, ecs, daemon, devcontainers, ci, quadlets:
            what was found (a CI file's run lines are in ``run_lines``, its containers in
            ``ci``).
        diagnostics: per-file problems (see :class:`SourceDiagnostic`).
    """

    path: str
    kind: str
    src: SourceText | None = None
    yaml: YamlFile | None = None
    compose: tuple[ComposeFile, ...] = ()
    objects: tuple[K8sObject, ...] = ()
    pod_specs: tuple[PodSpec, ...] = ()
    run_lines: tuple[RunLine, ...] = ()
    ecs: tuple[EcsTaskDefinition, ...] = ()
    daemon: tuple[DaemonConfig, ...] = ()
    devcontainers: tuple[DevContainer, ...] = ()
    ci: tuple[CiFile, ...] = ()
    quadlets: tuple[QuadletUnit, ...] = ()
    diagnostics: tuple[SourceDiagnostic, ...] = ()


def load_path(path: str, *, timeout: float | None = READ_TIMEOUT) -> LoadedFile:
    """Read ``path`` (``-``: standard input) through the one bounded reader
    (:func:`~shmguard.sources.read.read_input`: the size cap, a FIFO's ``timeout``) and load
    it; what cannot be read gives a diagnostic."""
    data = read_input(path, timeout=timeout)
    if isinstance(data, SourceDiagnostic):
        return LoadedFile(path, "error", diagnostics=(data,))
    return load_bytes(data, path)


def load_bytes(data: bytes, path: str) -> LoadedFile:
    """Load ``data`` (the content of ``path``) as whatever source it is (the cyclic garbage
    collector paused meanwhile: :mod:`~shmguard.sources.gcpause`)."""
    gcpause.pause()
    try:
        return _load(data, path)
    finally:
        gcpause.resume()


def _load(data: bytes, path: str) -> LoadedFile:
    src = SourceText.decode(data, path)
    if isinstance(src, SourceDiagnostic):
        return LoadedFile(path, "error", diagnostics=(src,))
    text = src.text
    if is_devcontainer(path):  # JSON with comments: by name, as VS Code reads it
        return _devcontainer(path, src)
    if is_quadlet(path):  # a systemd unit: by its suffix, as Quadlet reads it
        return LoadedFile(path, "quadlet", src, quadlets=(load_quadlet(src),))
    named_yaml = path.lower().endswith(_YAML_NAMES)
    if _yaml_like(named_yaml, text):
        yf = load_yaml(src)
        loaded = _from_yaml(path, src, yf)
        # Only sniffed as YAML (a TOML or INI section header, code starting with a bracket):
        # what does not parse is not a broken manifest but another format, read as text below.
        sniffed_other = not named_yaml and any(not d.info for d in yf.diagnostics)
        # YAML of no known kind that mentions docker run (a script or prose that merely
        # looked like YAML) is searched for run lines instead
        if not sniffed_other and (loaded.kind != "yaml" or named_yaml or not MENTION.search(text)):
            return loaded
    if not MENTION.search(text):
        return LoadedFile(path, "text", src)
    lines = tuple(_run_lines(path, src))
    return LoadedFile(path, "run-lines" if lines else "text", src, run_lines=lines)


def _yaml_like(named_yaml: bool, text: str) -> bool:
    """Whether a file (not a devcontainer or Quadlet file) is read as YAML first."""
    return named_yaml or text.lstrip()[:1] in ("{", "[") or bool(_YAML_START.match(text))


#: The smallest file whose documents :func:`kubernetes_documents` reads one at a time.
STREAM_MIN_BYTES = 1024 * 1024


class Unstreamable(Exception):
    """Raised by :func:`kubernetes_documents`' iterator: a document depends on another (an
    owner reference, the shmguard webhook's configuration), is no Kubernetes object stream
    (a Compose document, no object at all) or the stream has a problem: load it whole."""


def kubernetes_documents(data: bytes, path: str) -> tuple[SourceText, Iterator[LoadedFile]] | None:
    """A big multi-document Kubernetes stream (``---`` separated, at least
    :data:`STREAM_MIN_BYTES`, UTF-8), one :class:`LoadedFile` per document, each composed
    when taken: what :func:`load_bytes` gives for the whole file, cut by document, in memory
    proportional to one document (a 15 MB stream of 96k Pods held 1.5 GB of nodes whole).

    None when the file is not such a stream; the iterator raises :class:`Unstreamable` when a
    document shows that the documents cannot be read apart (the caller then loads the file
    whole), including at its end when it found no object (another kind of file)."""
    if len(data) < STREAM_MIN_BYTES or b"\n---" not in data:
        return None
    if is_devcontainer(path) or is_quadlet(path):
        return None
    src = SourceText.decode(data, path)
    if isinstance(src, SourceDiagnostic) or src.encoding != "utf-8":
        return None
    if not _yaml_like(path.lower().endswith(_YAML_NAMES), src.text):
        return None
    if "{{" in src.text or "{%" in src.text:
        return None  # whether it is a template is decided over all its documents (load_yaml)
    return src, _documents(src, path)


def part_documents(src: SourceText, path: str, part: Part) -> Iterator[LoadedFile]:
    """:func:`kubernetes_documents`' documents of one part of its stream
    (:func:`~shmguard.sources.yamlload.cut_documents`), each composed when taken, the same
    views and positions as there; raises :class:`Unstreamable` as that iterator does, except
    for a part with no object (whether the stream has one is the caller's to tell)."""
    return _documents(src, path, part)


def _documents(src: SourceText, path: str, part: Part | None = None) -> Iterator[LoadedFile]:
    diags: list[SourceDiagnostic] = []
    found = part is not None
    docs = iter_documents(src, diags) if part is None else iter_part(src, part, diags)
    for doc in docs:
        if diags:
            raise Unstreamable(diags[0].message)
        yf = YamlFile(src, (doc,), ())
        if compose_files(yf):
            raise Unstreamable("a Compose document")
        objs = tuple(objects(yf))
        for o in objs:
            if o.kind == "MutatingWebhookConfiguration" or controller(o) is not None:
                raise Unstreamable(f"{o.kind} {o.name}: read with the other documents")
        found = found or bool(objs)
        pods = tuple(p for o in objs for p in pod_specs(o))
        yield LoadedFile(path, "kubernetes", src, yf, objects=objs, pod_specs=pods)
    if diags or not found:
        raise Unstreamable(diags[0].message if diags else "no Kubernetes object")


def _devcontainer(path: str, src: SourceText) -> LoadedFile:
    yf, dc = load_devcontainer(src.data, path)
    diags = tuple(
        SourceDiagnostic(d.file, d.line, d.column, d.message, DiagnosticKind.INVALID_JSON)
        if d.kind is DiagnosticKind.INVALID_YAML
        else d
        for d in yf.diagnostics
    )
    if dc is None:
        return LoadedFile(path, "devcontainer" if not diags else "yaml", src, diagnostics=diags)
    return LoadedFile(path, "devcontainer", src, devcontainers=(dc,), diagnostics=diags)


def _from_yaml(path: str, src: SourceText, yf: YamlFile) -> LoadedFile:
    compose = tuple(compose_files(yf))
    if compose:
        return LoadedFile(path, "compose", src, yf, compose=compose, diagnostics=yf.diagnostics)
    objs = tuple(objects(yf))
    if objs:
        pods = tuple(p for o in objs for p in pod_specs(o))
        return LoadedFile(
            path, "kubernetes", src, yf, objects=objs, pod_specs=pods, diagnostics=yf.diagnostics
        )
    ecs, daemon = json_sources(yf)
    if ecs:
        return LoadedFile(path, "ecs", src, yf, ecs=tuple(ecs), diagnostics=yf.diagnostics)
    if daemon:
        return LoadedFile(
            path, "daemon-json", src, yf, daemon=tuple(daemon), diagnostics=yf.diagnostics
        )
    ci = ci_file(path, yf)
    if ci is not None:
        return LoadedFile(
            path, ci.kind, src, yf, run_lines=ci.run_lines, ci=(ci,), diagnostics=yf.diagnostics
        )
    diags = yf.diagnostics
    if path.lower().endswith(".json") and diags:
        diags = tuple(
            SourceDiagnostic(d.file, d.line, d.column, d.message, DiagnosticKind.INVALID_JSON)
            if d.kind is DiagnosticKind.INVALID_YAML
            else d
            for d in diags
        )
    return LoadedFile(path, "yaml", src, yf, diagnostics=diags)


def _run_lines(path: str, src: SourceText) -> list[RunLine]:
    text = src.text
    name = Path(path).name.lower()
    if name.endswith((".md", ".markdown")) or re.search(r"^ {0,3}(```|~~~)", text, re.M):
        return list(markdown_run_lines(src))
    if name.endswith(".rst") or re.search(r"^\.\. [\w-]+::", text, re.M):
        return list(rst_run_lines(src))
    if "dockerfile" in name or (
        re.search(r"^FROM\s", text, re.M | re.I) and re.search(r"^RUN\s", text, re.M | re.I)
    ):
        return list(dockerfile_run_lines(src))
    return list(shell_run_lines(src))

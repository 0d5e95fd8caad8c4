"""`check`: SHM rules over config sources, and ``--fix``. The library part; the CLI renders.

A loaded file (:func:`shmguard.sources.load.load_path`) is cut into units
(:func:`units`: each Compose service, Kubernetes pod spec and run line, with its workload
class); the rules of :data:`shmguard.lint.config.RULES` run over each through the one rule
engine, whose severity follows the unit's class (``container`` or ``ml``). A finding met twice
(a volume shared by several Argo templates) is reported once. Findings suppressed in the file
(:mod:`shmguard.lint.suppress`: ``# shmguard: ignore[CODE]`` comments, the
``shmguard.io/ignore`` annotation or label) are not reported, so ``--fix`` leaves them too.

:func:`fix_file` applies the findings' edits (safe ones; unsafe ones too on request) to the
original bytes, loads the result again and repeats until nothing changes (at most
:data:`MAX_ROUNDS` rounds), so every byte outside an edit is kept. Writing is the caller's
(:func:`write_atomic`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shmguard.config import Config
from shmguard.lint import suppress
from shmguard.lint.config._base import CheckOptions, Unit
from shmguard.lint.config.shm033_policy_shrinks_dev_shm import is_policy
from shmguard.lint.engine import Rule, run_rules
from shmguard.model.finding import Applicability, Edit, Finding, apply_edits
from shmguard.sources import gcpause
from shmguard.sources.detect import (
    ecs_workload,
    pod_container_workload,
    run_workload,
    service_workload,
)
from shmguard.sources.diagnostics import SourceDiagnostic
from shmguard.sources.load import (
    LoadedFile,
    Unstreamable,
    kubernetes_documents,
    load_bytes,
    part_documents,
)
from shmguard.sources.workload import Workload

if TYPE_CHECKING:
    from shmguard.lint.check_stream_jobs import PartResult
    from shmguard.sources.text import SourceText
    from shmguard.sources.yamlload import Part

__all__ = [
    "MAX_ROUNDS",
    "CheckOptions",
    "FileResult",
    "FixResult",
    "check_loaded",
    "check_stream",
    "fix_file",
    "units",
    "write_atomic",
]

#: Most fix rounds (fix, re-load, re-check) before giving up on reaching a fixed point.
MAX_ROUNDS = 5


@dataclass(frozen=True)
class FileResult:
    """What ``check`` found in one file: its kind (:class:`LoadedFile`), findings (most severe
    first) and per-file diagnostics (a file or part of it that could not be read)."""

    path: str
    kind: str
    findings: tuple[Finding, ...]
    diagnostics: tuple[SourceDiagnostic, ...]


def units(lf: LoadedFile) -> Iterator[Unit]:
    """The units of a loaded file: Compose services, pod specs, run lines, ECS task
    definitions (``ml`` when any container is) and daemon.json, in file order."""
    src = lf.src
    if src is None:
        return
    for cf in lf.compose:
        for svc in cf.services:
            yield Unit(src, "compose", service_workload(svc), service=svc)
    for pod in lf.pod_specs:
        cs = tuple((c, pod_container_workload(pod, c)) for c in pod.containers)
        ml = [w for _, w in cs if w.cls == "ml"]
        wl = ml[0] if ml else (cs[0][1] if cs else Workload("container"))
        yield Unit(src, "kubernetes", wl, pod=pod, containers=cs)
    policies = [o for o in lf.objects if is_policy(o)]
    if policies:
        victims = tuple(_shm_workloads(lf))
        for obj in policies:
            yield Unit(src, "policy", Workload("container"), policy=obj, victims=victims)
    for rl in lf.run_lines:
        yield Unit(src, "run", run_workload(rl), run=rl)
    for ci in lf.ci:
        for c in ci.containers:
            if c.run is not None:  # a job or service container: docker create with options
                yield Unit(src, "run", run_workload(c.run), run=c.run, ci=c)
    for q in lf.quadlets:
        if q.run is not None:  # a .container unit: the podman run Quadlet generates
            yield Unit(src, "run", run_workload(q.run), run=q.run, quadlet=q)
    for devc in lf.devcontainers:
        if devc.run is not None:  # the docker run it starts, read in its blanked text
            yield Unit(devc.src, "run", run_workload(devc.run), run=devc.run, devcontainer=devc)
    for td in lf.ecs:
        ws = [ecs_workload(c) for c in td.containers]
        ml = [w for w in ws if w.cls == "ml"]
        yield Unit(src, "ecs", ml[0] if ml else Workload("container"), ecs=td)
    for dc in lf.daemon:
        yield Unit(src, "daemon-json", Workload("container"), daemon=dc)


def _shm_workloads(lf: LoadedFile) -> Iterator[tuple[str, str]]:
    """(kind, name) of each object of ``lf`` with an ML container that mounts a memory
    emptyDir at /dev/shm (what an emptyDir sizing policy shrinks)."""
    from shmguard.lint.config._base import mounts_at_shm
    from shmguard.sources.k8s_model import text

    seen = set()
    for pod in lf.pod_specs:
        memory = [v for v in pod.volumes if v.empty_dir is not None and text(v.medium) == "Memory"]
        for c in pod.containers:
            if pod_container_workload(pod, c).cls != "ml":
                continue
            if any(mounts_at_shm(c, v.name) for v in memory):
                key = (pod.obj.kind, pod.obj.name or "")
                if key not in seen:
                    seen.add(key)
                    yield key
                break


def _rules() -> tuple[Rule[Unit, CheckOptions], ...]:
    from shmguard.lint.config import RULES

    return RULES


#: The unit kind that each ``Rule.targets`` name is (a run line is either tool's).
_TARGET_KINDS = {
    "compose": "compose",
    "kubernetes": "kubernetes",
    "docker-run": "run",
    "podman-run": "run",
    "ecs": "ecs",
    "daemon-json": "daemon-json",
    "kubernetes-policy": "policy",
}
_BY_KIND: dict[str, tuple[Rule[Unit, CheckOptions], ...]] = {}


def _rules_for(kind: str) -> tuple[Rule[Unit, CheckOptions], ...]:
    """The built-in rules whose ``targets`` name units of ``kind``, in code order (every one
    for a kind no target names, and a rule with a target of another spelling runs on every
    kind). A rule's check yields nothing for a unit of a kind it does not target
    (tests/lint/config/test_rule_targets.py holds each rule to it), so the others are not
    called: about a third of the rule calls over ../shared/corpus."""
    got = _BY_KIND.get(kind)
    if got is None:
        every = _rules()
        if kind not in _TARGET_KINDS.values():
            got = every
        else:
            got = tuple(
                r for r in every if any(_TARGET_KINDS.get(t, kind) == kind for t in r.targets)
            )
        _BY_KIND[kind] = got
    return got


def check_loaded(
    lf: LoadedFile,
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
    rules: Iterable[Rule[Unit, CheckOptions]] | None = None,
) -> FileResult:
    """Run the SHM rules (default: all, then the configuration's user-defined checks) over
    every unit of ``lf`` (the cyclic garbage collector paused meanwhile, as
    :func:`~shmguard.sources.load.load_bytes` does)."""
    gcpause.pause()
    try:
        return _check(lf, options, config, rules)
    finally:
        gcpause.resume()


def _check(
    lf: LoadedFile,
    options: CheckOptions | None,
    config: Config | None,
    rules: Iterable[Rule[Unit, CheckOptions]] | None,
) -> FileResult:
    inline = suppress.scan(lf.src.text) if lf.src is not None else suppress.Suppressions({})
    found = _findings(units(lf), inline, options, config, rules)
    return FileResult(lf.path, lf.kind, found, lf.diagnostics)


def _findings(
    each: Iterable[Unit],
    inline: suppress.Suppressions,
    options: CheckOptions | None,
    config: Config | None,
    rules: Iterable[Rule[Unit, CheckOptions]] | None,
) -> tuple[Finding, ...]:
    """The findings of the units ``each`` (not suppressed, each once), in file order."""
    return _in_file_order(_once(_kept(each, inline, options, config, rules)))


def _kept(
    each: Iterable[Unit],
    inline: suppress.Suppressions,
    options: CheckOptions | None,
    config: Config | None,
    rules: Iterable[Rule[Unit, CheckOptions]] | None,
) -> Iterator[Finding]:
    """The findings of the units ``each`` that are not suppressed, in unit order."""
    options = options or _DEFAULT_OPTIONS
    custom = config.checks if config is not None else ()
    given = tuple(rules) if rules is not None else None
    by_kind: dict[str, tuple[Rule[Unit, CheckOptions], ...]] = {}
    for unit in each:
        head = unit.run.line if unit.run is not None else None
        chosen = given if given is not None else by_kind.get(unit.kind)
        if chosen is None:
            chosen = by_kind[unit.kind] = (*_rules_for(unit.kind), *custom)
        for f in run_rules(chosen, unit, options, config=config, workload=unit.workload.cls):
            if suppress.matches(f.code, unit.workload.ignore) or inline.suppressed(f, head):
                continue
            yield f


def _once(found: Iterable[Finding]) -> list[Finding]:
    """``found`` without the findings met before (the same code, span and message: a volume
    shared by several Argo templates), in their order."""
    seen: set[tuple[str, int | None, int | None, str]] = set()
    out: list[Finding] = []
    for f in found:
        loc = f.location
        key = (f.code, loc.start if loc else None, loc.end if loc else None, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _in_file_order(found: list[Finding]) -> tuple[Finding, ...]:
    found.sort(key=lambda f: (f.location.start or 0) if f.location else 0)
    return tuple(found)


def check_stream(
    data: bytes,
    path: str,
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
    jobs: int = 1,
) -> FileResult | None:
    """:func:`check_loaded` of ``load_bytes(data, path)`` for a big multi-document Kubernetes
    stream, its documents composed and checked one at a time and dropped
    (:func:`~shmguard.sources.load.kubernetes_documents`): the same result in memory
    proportional to one document and the findings. None when the file is no such stream, or
    its documents cannot be read apart (a policy, an owner reference, the webhook's
    configuration: :func:`check_loaded` then).

    With ``jobs`` above 1 (Linux: the processes are forked), the stream is cut into up to
    ``jobs`` runs of whole documents checked at once in as many processes
    (:func:`shmguard.lint.check_stream_jobs.check_parts`): the same result."""
    stream = kubernetes_documents(data, path)
    if stream is None:
        return None
    src, parts = stream
    gcpause.pause()
    try:
        inline = suppress.scan(src.text)
        if jobs > 1:
            from shmguard.lint.check_stream_jobs import check_parts

            got = check_parts(src, jobs, lambda p: _part(src, path, p, inline, options, config))
            if got is not None:
                found = _in_file_order(_once(f for chunk in got for f in chunk))
                return FileResult(path, "kubernetes", found, ())
        found = _findings(_stream_units(parts), inline, options, config, None)
    except Unstreamable:
        return None
    finally:
        gcpause.resume()
    return FileResult(path, "kubernetes", found, ())


def _part(
    src: SourceText,
    path: str,
    part: Part,
    inline: suppress.Suppressions,
    options: CheckOptions | None,
    config: Config | None,
) -> PartResult:
    """The findings of one part of a stream (not suppressed, each once, in unit order), its
    number of documents and whether it holds an object; raises :class:`Unstreamable`."""
    tally = _Tally()
    from shmguard.lint.check_stream_jobs import PartResult

    units_of = _stream_units(part_documents(src, path, part), tally)
    found = _once(_kept(units_of, inline, options, config, None))
    return PartResult(found, tally.documents, tally.objects)


class _Tally:
    """What :func:`_stream_units` went through: documents, and whether any held an object."""

    def __init__(self) -> None:
        self.documents = 0
        self.objects = False


def _stream_units(parts: Iterable[LoadedFile], tally: _Tally | None = None) -> Iterator[Unit]:
    for part in parts:
        if any(is_policy(o) for o in part.objects):  # its victims are every document's
            raise Unstreamable("a policy")
        if tally is not None:
            tally.documents += 1
            tally.objects = tally.objects or bool(part.objects)
        yield from units(part)


#: The default options (frozen, so one instance serves every call).
_DEFAULT_OPTIONS = CheckOptions()


@dataclass(frozen=True)
class FixResult:
    """The outcome of :func:`fix_file`: the new bytes, the findings whose edits were applied,
    the findings left after the last round, and the rounds it took."""

    data: bytes
    applied: tuple[Finding, ...]
    remaining: FileResult
    rounds: int


def _fixable(f: Finding, unsafe: bool) -> bool:
    fix = f.fix
    if fix is None or not fix.edits:
        return False
    ok = (Applicability.SAFE, Applicability.UNSAFE) if unsafe else (Applicability.SAFE,)
    return fix.applicability in ok


def fix_file(
    data: bytes,
    path: str,
    options: CheckOptions | None = None,
    *,
    config: Config | None = None,
    unsafe: bool = False,
    rules: Iterable[Rule[Unit, CheckOptions]] | None = None,
) -> FixResult:
    """Apply the edits of ``path``'s fixable findings to ``data`` until nothing changes
    (findings of ``rules``, default: :func:`check_loaded`'s).

    Per round, findings are taken in file order and one whose edits overlap an edit already
    taken waits for the next round (it is re-derived from the re-loaded text).
    """
    applied: list[Finding] = []
    rounds = 0
    given = tuple(rules) if rules is not None else None
    result = check_loaded(load_bytes(data, path), options, config=config, rules=given)
    while rounds < MAX_ROUNDS:
        taken: list[Edit] = []
        for f in result.findings:
            if not _fixable(f, unsafe):
                continue
            assert f.fix is not None
            spans = [(e.start, e.end) for e in f.fix.edits]
            if any(_overlap(s, (t.start, t.end)) for s in spans for t in taken):
                continue
            taken.extend(f.fix.edits)
            applied.append(f)
        if not taken:
            break
        rounds += 1
        data = apply_edits(data, taken)
        result = check_loaded(load_bytes(data, path), options, config=config, rules=given)
    return FixResult(data, tuple(applied), result, rounds)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] == b[0] or (a[0] < b[1] and b[0] < a[1])


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: a temporary file in the same directory, the original's
    permission bits (and owner, when allowed), then ``os.replace`` (atomic on POSIX and
    Windows). A symbolic link is followed: the file it names is replaced and the link kept
    (replacing the link itself left the linked file, a kustomize base say, unchanged). A file
    with more than one hard link is rewritten in place instead, after the same temporary copy
    is written whole, so that every link keeps naming it (a replace would leave the other links
    on the old text); the copy is removed after, and kept (``.NAME.*.tmp``, the text to
    restore) when the rewrite fails or is killed midway.

    Raises:
        OSError: the directory is not writable, or the replace failed (the original stays).
    """
    target = Path(os.path.realpath(path))
    st = target.stat()
    tmp = _temp_copy(target, data)
    try:
        if st.st_nlink > 1:
            # a failure here keeps the copy (not unlinked below): the text to restore
            _overwrite(target, data)
            Path(tmp).unlink(missing_ok=True)
            return
        if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            # not root: the file becomes the writer's, as any editor's save makes it
            with contextlib.suppress(PermissionError):
                os.chown(tmp, st.st_uid, st.st_gid)
        os.chmod(tmp, st.st_mode & 0o7777)  # after chown, which clears set-id bits
        os.replace(tmp, target)
    except BaseException:
        if st.st_nlink == 1:
            Path(tmp).unlink(missing_ok=True)
        raise


def _temp_copy(target: Path, data: bytes) -> str:
    """A temporary file beside ``target`` holding ``data``, synced (a full disk fails here,
    the original untouched)."""
    import tempfile  # only --fix writes: not imported by a check

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _overwrite(target: Path, data: bytes) -> None:
    """Rewrite ``target`` in place (a file with several hard links: every link keeps naming
    it)."""
    with open(target, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())

"""Which files to read: the paths given, directories walked, ``.gitignore`` respected, the
exclusions applied (:mod:`shmguard.sources.exclude`: ruff's ``exclude``/``extend-exclude``),
and the files a Dev Container configuration (``dockerComposeFile``) or a Quadlet ``.kube``
unit (``Yaml=``) names added where the walk did not find them.

Inside a git work tree, ``git check-ignore --stdin`` decides (one call for all candidates, so
every git rule applies: nested ``.gitignore``, ``info/exclude``, global excludes). Elsewhere, or
when git is missing, a small reader applies each directory's ``.gitignore``: ``#`` comments,
``!`` negation, a trailing ``/`` for directories, a leading ``/`` or inner ``/`` anchoring the
pattern to that directory, ``**`` matching across directories (gitignore(5)); the last matching
pattern wins. ``.git`` directories are never entered.

The walk rule, shared with the bounded reader (:mod:`shmguard.sources.read`): in a directory
walk a FIFO, a device or a socket is skipped and counted (:attr:`Walk.skipped`; the files that
turn out binary, over the cap or undecodable are skipped by ``check`` when read), while a
directory that cannot be listed and a symbolic link that loops (ELOOP) are errors
(:attr:`Walk.errors`) and the rest of the tree is still walked. Symbolic links to directories
are not followed; a symbolic link to a file is read, and when its real path lies outside the
walked directory it is in :attr:`Walk.outside` (``check --fix`` reads it but never writes it).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shmguard.sources.diagnostics import DiagnosticKind, SourceDiagnostic
from shmguard.sources.exclude import Exclusions


def _git_ignored(root: Path, files: list[Path]) -> set[Path] | None:
    """The subset of ``files`` git ignores, or None when ``root`` is not in a git work tree."""
    import subprocess  # only for a walk: not imported by ``check FILE``

    try:
        inside = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        res = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "--stdin", "-z"],
            input="\0".join(str(f.resolve()) for f in files),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode not in (0, 1):
        return None
    return {Path(p) for p in res.stdout.split("\0") if p}


def _rules(directory: Path) -> list[tuple[str, bool, bool, bool]]:
    """(pattern, negated, directory-only, anchored) from ``directory/.gitignore``."""
    out = []
    try:
        lines = (directory / ".gitignore").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        line = line[1:] if neg else line
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        out.append((line.lstrip("/"), neg, dir_only, anchored))
    return out


def _ignored(rel: str, is_dir: bool, rules: list[tuple[str, bool, bool, bool]]) -> bool:
    result = False
    for pat, neg, dir_only, anchored in rules:
        if dir_only and not is_dir:
            continue
        target = rel if anchored else rel.rsplit("/", 1)[-1]
        if fnmatch.fnmatchcase(target, pat) or (
            "**/" in pat and fnmatch.fnmatchcase(target, pat.replace("**/", ""))
        ):
            result = not neg
    return result


@dataclass
class Walk:
    """What :func:`walk` found.

    Attributes:
        files: the files to read, in order (named paths as given, then each directory's files
            sorted).
        walked: those of ``files`` found by walking a directory (not named).
        outside: walked symbolic links whose real path is outside the directory walked.
        skipped: ``(path, reason)`` of walked files not read: ``fifo``, ``device``, ``socket``.
        errors: one diagnostic per directory that could not be listed or symbolic link that
            loops.
    """

    files: list[str] = field(default_factory=list)
    walked: set[str] = field(default_factory=set)
    outside: set[str] = field(default_factory=set)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[SourceDiagnostic] = field(default_factory=list)


def _kind_of(mode: int) -> str | None:
    """Why a non-regular file is skipped in a walk, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "socket" if stat.S_ISSOCK(mode) else "special"


def _walk_plain(root: Path, exclusions: Exclusions, out: Walk) -> list[Path]:
    """The files under ``root`` (not ignored by ``.gitignore`` nor excluded); FIFOs and
    devices go to ``out.skipped``, unreadable directories and symlink loops to ``out.errors``.
    """
    found: list[Path] = []
    real_root = os.path.realpath(root)
    stack: list[tuple[Path, list[tuple[Path, list[tuple[str, bool, bool, bool]]]]]] = [(root, [])]
    while stack:
        d, inherited = stack.pop()
        scopes = [*inherited, (d, _rules(d))]
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            msg = f"cannot read directory: {err.strerror or err}; its files were not checked"
            out.errors.append(SourceDiagnostic(str(d), None, None, msg, DiagnosticKind.UNREADABLE))
            continue
        subdirs = []
        for e in entries:
            p = Path(e.path)
            is_dir = e.is_dir(follow_symlinks=False)
            if (
                e.name == ".git"
                or exclusions.excludes(p, is_dir)
                or any(
                    _ignored(p.relative_to(base).as_posix(), is_dir, rules)
                    for base, rules in scopes
                    if rules
                )
            ):
                continue
            if is_dir:
                subdirs.append((p, scopes))
                continue
            try:
                mode = e.stat().st_mode  # follows a symbolic link
            except OSError as err:
                if err.errno == errno.ELOOP:
                    msg = "symbolic link loop (too many levels of symbolic links); not read"
                    diag = SourceDiagnostic(str(p), None, None, msg, DiagnosticKind.SYMLINK_LOOP)
                    out.errors.append(diag)
                elif err.errno != errno.ENOENT:  # a dangling link names nothing to check
                    msg = f"cannot read: {err.strerror or err}"
                    diag = SourceDiagnostic(str(p), None, None, msg, DiagnosticKind.UNREADABLE)
                    out.errors.append(diag)
                continue
            if stat.S_ISDIR(mode):  # a symbolic link to a directory: not followed
                continue
            why = _kind_of(mode)
            if why is not None:
                out.skipped.append((str(p), why))
                continue
            if e.is_symlink():
                real = os.path.realpath(p)
                if os.path.commonpath([real, real_root]) != real_root:
                    out.outside.add(str(p))
            found.append(p)
        stack.extend(reversed(subdirs))
    return found


def walk(paths: list[str], skip: Iterable[Path] = (), exclusions: Exclusions | None = None) -> Walk:
    """The files to read for ``paths``: ``-`` and files as given (left out when
    ``exclusions`` force them), directories walked (sorted, ignored and excluded files left
    out, and the files of ``skip``: ``check``'s own baseline file, which is no configuration
    to check). Never raises."""
    excl = exclusions or Exclusions()
    left_out = {s.resolve() for s in skip}
    out = Walk()
    for path in paths:
        p = Path(path)
        if path == "-" or not p.is_dir():
            if not (path != "-" and excl.force and excl.excludes_named(p)):
                out.files.append(path)
            continue
        files = _walk_plain(p, excl, out)
        if left_out:
            files = [f for f in files if f.resolve() not in left_out]
        ignored = _git_ignored(p, [*files, *(Path(s) for s, _ in out.skipped)])
        if ignored:
            out.skipped = [(s, why) for s, why in out.skipped if Path(s).resolve() not in ignored]
        for f in files:
            if not ignored or f.resolve() not in ignored:
                out.files.append(str(f))
                out.walked.add(str(f))
    _add_compose_refs(out, excl)
    return out


def _add_compose_refs(out: Walk, excl: Exclusions) -> None:
    """Add the files a Dev Container configuration (``dockerComposeFile``: Compose) or a
    Quadlet ``.kube`` unit (``Yaml=``: Kubernetes) in ``out.files`` names that are not there
    yet (named alone, or outside the walked directory: ``../docker-compose.yml``): they are
    checked as what they are."""
    from shmguard.sources.devcontainer import compose_paths, is_devcontainer
    from shmguard.sources.quadlet import kube_paths
    from shmguard.sources.read import read_input

    seen = {os.path.realpath(f) for f in out.files if f != "-"}
    for f in list(out.files):
        if f == "-" or not (is_devcontainer(f) or f.lower().endswith(".kube")):
            continue
        data = read_input(f)
        if not isinstance(data, bytes):
            continue  # reported when the file itself is read
        for ref in [*compose_paths(data, f), *kube_paths(data, f)]:
            real = os.path.realpath(ref)
            if real in seen or not os.path.isfile(ref) or excl.excludes(Path(ref), False):
                continue
            seen.add(real)
            out.files.append(ref)


def discover(paths: list[str], skip: Iterable[Path] = ()) -> Iterator[str]:
    """The files to read for ``paths`` (:func:`walk`'s files, with the default exclusions)."""
    yield from walk(paths, skip).files

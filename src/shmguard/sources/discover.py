"""Which files to read: the paths given, directories walked, ``.gitignore`` respected.

Inside a git work tree, ``git check-ignore --stdin`` decides (one call for all candidates, so
every git rule applies: nested ``.gitignore``, ``info/exclude``, global excludes). Elsewhere, or
when git is missing, a small reader applies each directory's ``.gitignore``: ``#`` comments,
``!`` negation, a trailing ``/`` for directories, a leading ``/`` or inner ``/`` anchoring the
pattern to that directory, ``**`` matching across directories (gitignore(5)); the last matching
pattern wins. ``.git`` directories are never entered.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path


def _git_ignored(root: Path, files: list[Path]) -> set[Path] | None:
    """The subset of ``files`` git ignores, or None when ``root`` is not in a git work tree."""
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


def _walk_plain(root: Path) -> Iterator[Path]:
    stack: list[tuple[Path, list[tuple[Path, list[tuple[str, bool, bool, bool]]]]]] = [(root, [])]
    while stack:
        d, inherited = stack.pop()
        scopes = [*inherited, (d, _rules(d))]
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            p = Path(e.path)
            is_dir = e.is_dir(follow_symlinks=False)
            if e.name == ".git" or any(
                _ignored(p.relative_to(base).as_posix(), is_dir, rules)
                for base, rules in scopes
                if rules
            ):
                continue
            if is_dir:
                subdirs.append((p, scopes))
            elif e.is_file():
                yield p
        stack.extend(reversed(subdirs))


def discover(paths: list[str], skip: Iterable[Path] = ()) -> Iterator[str]:
    """The files to read for ``paths``: ``-`` and files as given, directories walked (sorted,
    ignored files left out, and the files of ``skip``: ``check``'s own baseline file, which is
    no configuration to check)."""
    left_out = {s.resolve() for s in skip}
    for path in paths:
        p = Path(path)
        if path == "-" or not p.is_dir():
            yield path
            continue
        files = list(_walk_plain(p))
        if left_out:
            files = [f for f in files if f.resolve() not in left_out]
        ignored = _git_ignored(p, files)
        for f in files:
            if not ignored or f.resolve() not in ignored:
                yield str(f)

"""Paths a walk leaves out: ``exclude`` / ``extend-exclude`` with ruff's semantics.

As ruff's settings of the same names (https://docs.astral.sh/ruff/settings/#exclude):
a pattern without ``/`` (``.venv``, ``*.tar``) matches any file or directory of that name at
any depth; a pattern with ``/`` (``deploy/legacy/*.yaml``, ``charts/**/values.yaml``) matches
the path relative to the project root (the configuration file's directory, else the current
directory). Globs as :func:`fnmatch.fnmatchcase` reads them, case-sensitive (``*``, ``?``,
``[...]``; ``**`` spans directories). An excluded directory is not entered. ``exclude`` replaces
:data:`DEFAULT_EXCLUDE` (ruff's default list); ``extend-exclude`` adds to it. Paths named on the
command line are checked even when excluded, unless ``force`` (``--force-exclude``, for
pre-commit, which names every staged file).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_EXCLUDE", "Exclusions"]

#: ruff's default ``exclude`` (its docs/configuration.md): tool caches, virtual environments,
#: version-control and build directories, where no configuration of the project's own lives.
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """One regular expression for the name patterns (no ``/``) and one for the path patterns
    (``**/`` also matching no directory at all), or None where there are none."""
    names, paths = [], []
    for raw in patterns:
        p = raw.strip("/") if raw.endswith("/") else raw.lstrip("/")
        if "/" not in p:
            names.append(fnmatch.translate(p))
            continue
        paths.append(fnmatch.translate(p))
        if "**/" in p:
            paths.append(fnmatch.translate(p.replace("**/", "")))

    def one(parts: list[str]) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{x})" for x in parts)) if parts else None

    return one(names), one(paths)


@dataclass(frozen=True)
class Exclusions:
    """The exclusion patterns of one run.

    Attributes:
        patterns: ``exclude`` (default :data:`DEFAULT_EXCLUDE`) then ``extend-exclude``.
        root: the project root relative patterns are read from (absolute); default the
            current directory.
        force: exclusions apply to the paths named on the command line too.
    """

    patterns: tuple[str, ...] = DEFAULT_EXCLUDE
    root: Path | None = None
    force: bool = False
    _root: str = field(default="", init=False, repr=False, compare=False)
    _names: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _paths: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            root = os.path.abspath(self.root if self.root is not None else os.getcwd())
        except OSError:  # the current directory was removed
            root = "/"
        object.__setattr__(self, "_root", root)
        names, paths = _compiled(self.patterns)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_paths", paths)

    def _matches(self, name: str, rel: str | None) -> bool:
        if self._names is not None and self._names.match(name):
            return True
        return rel is not None and self._paths is not None and bool(self._paths.match(rel))

    def _rel(self, path: Path) -> str:
        absolute = os.path.abspath(path)
        try:
            rel = os.path.relpath(absolute, self._root)
        except ValueError:  # another drive (Windows)
            return absolute
        return absolute if rel.startswith("..") else Path(rel).as_posix()

    def excludes(self, path: Path, is_dir: bool = False) -> bool:
        """Whether ``path`` (met in a walk) matches a pattern, by its name or its path
        relative to the root."""
        rel = self._rel(path) if self._paths is not None else None
        return self._matches(path.name, rel)

    def excludes_named(self, path: Path) -> bool:
        """Whether ``path`` (named on the command line) or a directory above it, up to the
        root, matches a pattern (ruff's ``--force-exclude``)."""
        parts = self._rel(path).split("/")
        return any(self._matches(parts[i], "/".join(parts[: i + 1])) for i in range(len(parts)))

"""The layering of docs/STYLE: data flows one way, and only cli/ renders."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "shmguard"


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _modules(package: str) -> list[Path]:
    base = SRC / package
    return sorted(base.rglob("*.py")) if base.is_dir() else [SRC / f"{package}.py"]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # only cli/ imports the renderers
        ("model", ("shmguard.render", "shmguard.cli")),
        ("estimate", ("shmguard.render", "shmguard.cli", "shmguard.inspect", "shmguard.lint")),
        ("config", ("shmguard.render", "shmguard.cli", "shmguard.inspect")),
        # reading what users write: no rule, host, measurement or renderer
        (
            "sources",
            (
                "shmguard.render",
                "shmguard.cli",
                "shmguard.inspect",
                "shmguard.measure",
                "shmguard.lint",
                "shmguard.fleet",
                "shmguard.triage",
            ),
        ),
        # the one fix plan: below lint (whose rules build their edits from it), above sources
        (
            "fix",
            (
                "shmguard.render",
                "shmguard.cli",
                "shmguard.inspect",
                "shmguard.measure",
                "shmguard.lint",
                "shmguard.fleet",
                "shmguard.monitor",
                "shmguard.torch",
            ),
        ),
        # rules take fact values from model/, never the host
        ("lint", ("shmguard.render", "shmguard.cli", "shmguard.inspect", "shmguard.measure")),
        ("inspect", ("shmguard.render", "shmguard.cli", "shmguard.measure", "shmguard.lint")),
        ("measure", ("shmguard.render", "shmguard.cli", "shmguard.lint")),
        ("triage", ("shmguard.render", "shmguard.cli", "shmguard.measure", "shmguard.lint")),
        ("render", ("shmguard.cli",)),
        # the webhook and policies decide from objects, never from this host
        ("fleet", ("shmguard.cli", "shmguard.measure", "shmguard.inspect")),
        # the bounded HTTP connection scheme of the webhook and the exporter: standard library
        ("serving", ("shmguard",)),
    ],
)
def test_package_does_not_import(package: str, forbidden: tuple[str, ...]) -> None:
    for path in _modules(package):
        bad = sorted(m for m in _imports(path) if m.startswith(forbidden))
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_model_knows_no_rule_host_or_renderer() -> None:
    for path in _modules("model"):
        assert all(
            m.startswith(("shmguard.model", "__future__")) or not m.startswith("shmguard")
            for m in _imports(path)
        ), path


def test_test_module_names_are_unique() -> None:
    # The test folders have no __init__.py, so pytest imports each test module by its base
    # name: two test_corpus.py files in different folders fail collection.
    names = [p.name for p in Path(__file__).resolve().parent.rglob("test_*.py")]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def _rule_modules() -> list[Path]:
    return sorted((SRC / "lint" / "config").glob("shm[0-9]*.py")) + sorted(
        (SRC / "lint" / "env").glob("env[0-9]*.py")
    )


def test_no_rule_imports_another_rule() -> None:
    """A predicate two rules ask lives in one module (lint/config/_predicates.py, the
    detector's ``strong`` in sources/workload.py), never in one rule imported by the other."""
    rules = _rule_modules()
    names = {f"shmguard.lint.{p.parent.name}.{p.stem}" for p in rules}
    assert len(rules) >= 30  # the globs find the rules
    for path in rules:
        tree = ast.parse(path.read_text())
        bad = sorted(m for m in _imports(path) if m in names)
        # ``from shmguard.lint.config import shm001_...`` names the module as an alias
        bad += sorted(
            f"{node.module}.{a.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for a in node.names
            if f"{node.module}.{a.name}" in names
        )
        # relative imports (``from .shm007_x import y``, ``from . import shm007_x``)
        bad += sorted(
            f"{'.' * node.level}{node.module or ''}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.level
            and (
                (node.module or "").startswith(("shm0", "env0"))
                or any(a.name.startswith(("shm0", "env0")) for a in node.names)
            )
        )
        assert not bad, f"{path.relative_to(SRC)} imports the rule module(s) {bad}"

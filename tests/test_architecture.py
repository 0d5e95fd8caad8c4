"""The layering of ../shared/STYLE.md: data flows one way, only cli/ renders, and the drawing of
the imports has no circle.

The import graph is read with :mod:`ast` from every ``import`` / ``from ... import`` anywhere
in a module: at its top, inside functions and under ``if TYPE_CHECKING:`` (a type-only import
still ties the two modules together for a reader, mypy and the next refactoring).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
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


# --- the drawing of the imports: layers, circles, private names, the version leaf --------------

#: The top-level packages (a direct child of src/shmguard: a folder, or a module such as
#: config.py), bottom to top. A package imports from its own layer or a lower one; an import
#: from a lower layer to a higher one is a "back-up" import, and only :data:`BACK_UP` may
#: (STYLE.md allows one; there is none now).
#: This is the order issue 20 reads from ../shared/STYLE.md's drawing (model and units at the
#: bottom; estimate, inspect, config; sources; triage, measure, lint; fix; monitor, torch,
#: fleet; render; cli) but for fix, which sits below lint: lint's rules build their edits from
#: the one fix plan (fix imports only sources, model and units). serving.py is a
#: standard-library leaf; _version.py the one home of ``__version__``; examples/ are scripts
#: over the guard; the package root (``__init__``, the curated public API) and ``__main__``
#: sit on top.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_version", "model", "units", "serving"),
    ("estimate", "inspect", "config"),
    ("sources",),
    ("fix",),
    ("triage", "measure", "lint"),
    ("monitor", "torch", "fleet"),
    ("render",),
    ("cli", "examples"),
    ("__init__", "__main__"),
)
#: The imports allowed to run back up, at most one. Empty: the guard's exception text (torch/)
#: once took the snippet text from render/, which closed a render <-> torch loop (render/'s
#: tune views show torch/'s TuneResult); the snippet emitter lives in fix/ (STYLE.md: fix
#: plans once and emits each syntax, snippet text included), below both.
BACK_UP: set[tuple[str, str]] = set()
#: The one module that defines ``__version__``; it imports nothing of shmguard.
VERSION_LEAF = "shmguard._version"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _module_paths() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(node: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    """``(module, name)`` of each shmguard import of one node (``name`` None for ``import m``),
    a relative import resolved against ``package``."""
    if isinstance(node, ast.Import):
        yield from ((a.name, None) for a in node.names if a.name.startswith("shmguard"))
    elif isinstance(node, ast.ImportFrom):
        full = node.module or ""
        if node.level:
            parts = package.split(".")
            full = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
        if full == "shmguard" or full.startswith("shmguard."):
            yield from ((full, a.name) for a in node.names)


@cache
def _import_graph() -> dict[str, frozenset[tuple[str, str | None]]]:
    """Module -> ``(imported module, name)`` for every shmguard import anywhere in it; ``name``
    is the name taken from the module (``from m import name``), None for a module itself
    (``import m``, or ``from pkg import submodule``). Relative imports are resolved."""
    mods = _module_paths()
    graph: dict[str, frozenset[tuple[str, str | None]]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: set[tuple[str, str | None]] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            for full, name in _resolve(node, package):
                if name is not None and f"{full}.{name}" in mods:  # from pkg import submodule
                    full, name = f"{full}.{name}", None
                out.add((full, name))
        graph[mod] = frozenset(out)
    return graph


def _top(module: str) -> str:
    """The top-level package of a module: ``shmguard.lint.check`` -> ``lint``; the root is
    ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_edges() -> Iterator[tuple[str, str]]:
    mods = _module_paths()
    for mod, imports in sorted(_import_graph().items()):
        for target in sorted({t for t, _ in imports}):
            assert target in mods, f"{mod} imports {target}, which is no module of src/shmguard"
            yield mod, target


def _layer(package: str) -> int:
    found = [i for i, layer in enumerate(LAYERS) if package in layer]
    assert found, f"{package} is in no layer of LAYERS: add it where ../shared/STYLE.md draws it"
    return found[0]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _package_graph(*, back_up: bool = True) -> dict[str, set[str]]:
    """Top-level package -> the packages it imports; without the :data:`BACK_UP` import(s)
    when ``back_up`` is False."""
    graph: dict[str, set[str]] = {}
    for mod, target in _module_edges():
        if not back_up and (mod, target) in BACK_UP:
            continue
        if _top(mod) != _top(target):
            graph.setdefault(_top(mod), set()).add(_top(target))
    return graph


def test_the_graph_reads_every_kind_of_import() -> None:
    """The reader sees imports inside functions, under TYPE_CHECKING and relative ones (else
    the tests below would pass on a graph with holes)."""
    graph = _import_graph()
    assert len(_module_paths()) > 200
    assert ("shmguard.estimate.policy", "Policy") in graph["shmguard.config"]
    # under TYPE_CHECKING: the root's curated API
    assert ("shmguard.config", "Config") in graph["shmguard"]
    # inside a function: the guard's message renders its snippet lazily
    assert ("shmguard.fix.snippets", "render_snippets") in graph["shmguard.torch.fixes"]
    # relative imports (src has none today) resolve against the importing package
    node = ast.parse("from ..engine import Rule\nfrom . import shm001_x").body
    assert list(_resolve(node[0], "shmguard.lint.config")) == [("shmguard.lint.engine", "Rule")]
    assert list(_resolve(node[1], "shmguard.lint.config")) == [("shmguard.lint.config", "shm001_x")]
    assert sum(1 for _ in _module_edges()) > 500


def test_no_circle_between_top_level_packages() -> None:
    """No circle between top-level packages; a named back-up import (:data:`BACK_UP`) may
    close at most the one loop between its two packages."""
    assert _circles(_package_graph(back_up=False)) == []
    assert _circles(_package_graph()) in ([], [sorted({_top(m) for e in BACK_UP for m in e})])


def test_every_import_goes_down_the_layers_but_one() -> None:
    up = sorted(
        (mod, target) for mod, target in _module_edges() if _layer(_top(mod)) < _layer(_top(target))
    )
    assert set(up) <= BACK_UP, f"imports running back up the layers: {sorted(set(up) - BACK_UP)}"
    packages = {(_top(m), _top(t)) for m, t in up}
    assert len(packages) <= 1, packages


def test_no_circle_between_modules() -> None:
    """Not inside a package either (cli/explain.py and cli/_explain_each.py, torch/check.py and
    torch/errors.py each imported the other's names): the shared part lives in one module both
    import."""
    graph: dict[str, set[str]] = {}
    for mod, target in _module_edges():
        if mod != target:
            graph.setdefault(mod, set()).add(target)
    assert _circles(graph) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_of_another_package_is_imported() -> None:
    """A ``_name``, or a name from a ``_module``, belongs to its top-level package: another
    one asks for a public name (the version leaf is the root's, for every face that prints it)."""
    bad = []
    for mod, imports in sorted(_import_graph().items()):
        for target, name in sorted(imports, key=str):
            if _top(mod) == _top(target) or target == VERSION_LEAF:
                continue
            inner = target.split(".")[2:]  # below the top-level package
            if (name is not None and _private(name)) or any(map(_private, inner)):
                bad.append(f"{mod} imports {target}" + (f".{name}" if name else ""))
    assert bad == []


def test_version_comes_from_a_leaf_module() -> None:
    graph = _import_graph()
    defining = sorted(
        mod
        for mod, path in _module_paths().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name) and t.id == "__version__"
    )
    assert defining == [VERSION_LEAF]
    assert graph[VERSION_LEAF] == frozenset()
    takers = sorted(
        m for m, imports in graph.items() if any(n == "__version__" for _, n in imports)
    )
    assert len(takers) >= 5  # the root, the CLI, the JSON and SARIF renderers, the exporters
    for mod in takers:
        sources = {t for t, n in graph[mod] if n == "__version__"}
        assert sources == {VERSION_LEAF}, f"{mod} takes __version__ from {sorted(sources)}"

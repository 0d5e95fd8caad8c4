"""Bad input gives one per-file diagnostic, quickly, and never stops other files loading."""

from __future__ import annotations

from pathlib import Path

from shmguard.sources.diagnostics import DiagnosticKind
from shmguard.sources.load import load_path
from shmguard.sources.yamlload import MAX_EXPANDED, load_yaml

GOOD = b"services:\n  app:\n    image: pytorch/pytorch\n    shm_size: 2g\n"


def _bomb(levels: int = 9) -> bytes:
    lines = ["a: &a [" + ",".join(["x"] * 9) + "]"]
    for i in range(1, levels + 1):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


def test_each_bad_file_gives_one_diagnostic_and_the_good_one_loads(tmp_path: Path) -> None:
    files = {
        "invalid.yaml": (b"a: [1, 2\nb: }\n", DiagnosticKind.INVALID_YAML),
        "bomb.yaml": (_bomb(), DiagnosticKind.ALIAS_BOMB),
        "recursive.yaml": (b"a: &x [1, *x]\n", DiagnosticKind.RECURSIVE_ALIAS),
        "deep.yaml": (b"a: " + b"[" * 30000 + b"]" * 30000 + b"\n", DiagnosticKind.TOO_DEEP),
        "latin1.yaml": (b"a: caf\xe9\n", DiagnosticKind.NOT_UTF8),
        "binary.yaml": (b"\x89PNG\r\n\x1a\n\x00\x00\x00", DiagnosticKind.BINARY),
        "big.yaml": (b"a: " + b"x" * (50 * 1024 * 1024) + b"\n", DiagnosticKind.TOO_LARGE),
        "helm.yaml": (b"replicas: {{ .Values.replicas }}\n", DiagnosticKind.TEMPLATE),
        "compose.yaml": (GOOD, None),
    }
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
    for name, (_, kind) in files.items():
        lf = load_path(str(tmp_path / name))
        if kind is None:
            assert lf.kind == "compose" and not lf.diagnostics
            assert lf.compose[0].services[0].name == "app"
        else:
            assert [d.kind for d in lf.diagnostics] == [kind], name
            assert lf.diagnostics[0].file.endswith(name)


def test_positions_of_diagnostics() -> None:
    (d,) = load_yaml(b"a: 1\nb: caf\xe9\n").diagnostics
    assert (d.line, d.column) == (2, 7) and "0xe9" in d.message
    (d,) = load_yaml(b"a: [1, 2\nb: }\n").diagnostics
    assert d.line == 2 and d.kind is DiagnosticKind.INVALID_YAML
    (d,) = load_yaml(b'x: 1\ny: {{ include "a" }}\n').diagnostics
    assert d.info and (d.line, d.column) == (2, 4)


def test_alias_bomb_bound_counts_expansion() -> None:
    small = load_yaml(_bomb(levels=4))  # 9**5 leaves, under the bound
    assert not small.diagnostics and MAX_EXPANDED > 9**5
    assert load_yaml(_bomb(levels=6)).diagnostics[0].kind is DiagnosticKind.ALIAS_BOMB


def test_documents_before_an_error_are_kept() -> None:
    yf = load_yaml(b"a: 1\n---\nb: [\n")
    assert len(yf.documents) == 1 and yf.diagnostics[0].kind is DiagnosticKind.INVALID_YAML


def test_depth_guard_on_compact_dashes_and_indentation() -> None:
    from shmguard.sources.yamlload import MAX_DEPTH, _too_deep

    n = MAX_DEPTH // 2
    assert _too_deep("- " * n + "x\n")
    assert not _too_deep("- " * (n - 1) + "x\n")
    assert not _too_deep("- -- x\n" + "# " + "-" * 2 * n + "\n")  # many dashes, no nesting
    assert _too_deep("a:\n" + " " * n + "b: 1\n")
    assert not _too_deep("a:\n" + " " * (n - 1) + "b: 1\n")

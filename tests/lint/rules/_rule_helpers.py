"""Helpers of the per-rule tests (tests/lint/rules/test_shmNNN.py): check a fixture or a
small source and keep one rule's findings, with their place, severity and fix."""

from __future__ import annotations

from pathlib import Path

from shmguard.lint.check import CheckOptions, check_loaded
from shmguard.lint.config import RULES
from shmguard.lint.engine import Rule
from shmguard.model.finding import Finding
from shmguard.sources.load import load_bytes, load_path

FIXTURES = Path(__file__).parents[1] / "config" / "fixtures_rules_b"


def only(code: str) -> list[Rule]:  # type: ignore[type-arg]
    return [r for r in RULES if r.code == code]


def findings(name: str, code: str) -> list[Finding]:
    return list(check_loaded(load_path(str(FIXTURES / name)), rules=only(code)).findings)


def at(fs: list[Finding]) -> list[tuple[str, str, int, int]]:
    out = []
    for f in fs:
        assert f.location is not None
        out.append((f.code, f.severity.value, f.location.line or 0, f.location.column or 0))
    return out


def found(
    src: str, name: str, code: str, options: CheckOptions | None = None
) -> list[tuple[str, int, int, str | None, str]]:
    """``code``'s findings in ``src`` read as file ``name``: (severity, line, column, the
    applicability of a fix with edits or None, message)."""
    r = check_loaded(load_bytes(src.encode(), name), options)
    out = []
    for f in r.findings:
        if f.code != code:
            continue
        assert f.location is not None
        app = f.fix.applicability.value if f.fix is not None and f.fix.edits else None
        out.append((f.severity.value, f.location.line or 0, f.location.column or 0, app, f.message))
    return out


def fixed(src: str, name: str, code: str, *, unsafe: bool = False) -> str:
    """``src`` with the edits of every ``code`` finding applied (they never overlap here)."""
    data = src.encode()
    edits = []
    for f in check_loaded(load_bytes(data, name)).findings:
        if f.code != code or f.fix is None or not f.fix.edits:
            continue
        if unsafe or f.fix.applicability.value == "safe":
            edits.extend(f.fix.edits)
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        data = data[: e.start] + e.content.encode() + data[e.end :]
    return data.decode()


def in_doc_example(code: str) -> list[tuple[str, int, int, str | None, str]]:
    """:func:`found` over the rule's documented bad example (``RuleDoc.bad``)."""
    (rule,) = only(code)
    assert rule.doc.bad is not None
    return found(rule.doc.bad.text, rule.doc.bad.file, code)


def fixes_of(src: bytes) -> list[tuple[str, str, str, tuple[str, ...]]]:
    out = []
    for f in check_loaded(load_bytes(src, "compose.yaml")).findings:
        assert f.fix is not None
        out.append(
            (
                f.code,
                f.fix.title,
                f.fix.applicability.value,
                tuple(e.content for e in f.fix.edits),
            )
        )
    return out


def pod(
    extra: str = "", volume: str = "{medium: Memory, sizeLimit: 1Gi}", mounted: bool = True
) -> str:
    """A Pod whose PyTorch container mounts (or not) the volume ``dshm``, an emptyDir
    ``volume`` (or the spec ``hostPath: ...`` when it starts so)."""
    mount = "      volumeMounts: [{name: dshm, mountPath: /dev/shm}]\n" if mounted else ""
    source = volume if volume.startswith("hostPath") else f"emptyDir: {volume}"
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: train\nspec:\n  containers:\n"
        "    - name: train\n      image: pytorch/pytorch\n"
        f"{mount}{extra}  volumes:\n    - name: dshm\n      {source}\n"
    )

"""SHM014 compose-float-size: a Compose ``shm_size`` that the target Compose reads as a number
it drops, truncates or rejects.

compose-go (Compose v2, YAML 1.2) reads ``1.5e9`` and ``2147483648.0`` as floats and silently
drops them (the 64 MiB default applies); Compose v1 (PyYAML, YAML 1.1) reads ``1.5e9`` as a
string and applies 1,500,000,000 bytes, but fails at create on ``1.5e+9`` / ``2147483648.0``;
podman-compose passes ``1.5e+9`` on as ``1500000000.0`` (applied) and ``"1.5e9"`` as text that
Podman rejects. A unitless fraction (``"1.5"``, ``1.5``) is 1 byte (one page) wherever it is
applied (config_formats.md 2.2; runtime_truth.md E, F).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, edit_fix, replace_scalar, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.fix import Change, Setting
from shmguard.sources.compose_types import applied_size, typed
from shmguard.sources.yamlnode import YScalar


def _intended(node: YScalar) -> int | None:
    """The bytes the author meant: the number written, when it is a whole number of at least
    one MiB (``1.5e9``, ``2147483648.0``); None for a fraction (``1.5``: intent unknown)."""
    try:
        f = float(node.value)
    except ValueError:
        return None
    if not math.isfinite(f) or f < 1 << 20 or f != int(f):
        return None
    return int(f)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a Compose ``shm_size`` / ``build.shm_size`` the target reads as a float, or a
    unitless fraction."""
    svc = unit.service
    if svc is None:
        return
    compose = options.target.compose
    tool = options.target.name("compose")
    for field in ("shm_size", "build.shm_size"):
        node = svc.get(field)
        if not isinstance(node, YScalar) or node.placeholder:
            continue
        v = typed(node, compose)
        fraction = isinstance(v, str) and _is_fraction(v)
        if not isinstance(v, float) and not fraction:
            continue
        result = applied_size(node, compose)
        if result.outcome == "applied" and not fraction and _intended(node) == result.bytes:
            continue  # Compose v1 / podman-compose apply exactly what was written
        if fraction or (isinstance(v, float) and 0 < v < 1 << 20):
            what = f"{node.value!r} is a unitless fraction: {tool} applies 1 byte (one 4 KiB page)"
        elif result.outcome == "default":
            what = f"{node.value!r} is a YAML float: {tool} drops it and the 64 MiB default applies"
        elif result.outcome == "error":
            what = f"{node.value!r} is a YAML float: {tool} fails ({result.detail})"
        else:
            what = f"{node.value!r} is read by {tool} as {result.bytes} bytes"
        n = _intended(node)
        edit = replace_scalar(node, f'"{n}"') if n is not None and node.plain else None
        example = f"the {n} bytes written" if n is not None else 'e.g. "1536m"'
        fix = edit_fix(
            f'Write "{n}"' if n is not None else "Write a size with a unit",
            "Write the size as a quoted string with a unit or as integer bytes "
            f"({example}), which every Compose reads the same.",
            (Change(Setting.SHM_SIZE, n, ("compose",)),) if n is not None else (),
            edit,
        )
        yield Violation(f"{field}: {what} (target {tool})", node.location(), fix)


def _is_fraction(v: str) -> bool:
    s = v.strip()
    try:
        f = float(s)
    except ValueError:
        return False
    return "." in s and "e" not in s.lower() and math.isfinite(f) and f != int(f) and f < 1024


DOC = RuleDoc(
    what=f"""\
A Compose `shm_size` (or `build.shm_size`) that the target Compose reads as a float
(`1.5e9`, `2147483648.0`, `1.5e+9`), or a unitless fraction (`"1.5"`). Which it is depends on
the target's YAML: Compose v2 (compose-go) resolves YAML 1.2, where `1.5e9` is a float;
Compose v1 and podman-compose use PyYAML (YAML 1.1), where `1.5e9` is a string. Compose v1
applies `1.5e9` as 1,500,000,000 bytes, and podman-compose applies a float, so those are not
flagged there. `--target compose=v2|v1|podman-compose` chooses (default v2).
Sources: {sources("compose")}.
""",
    why="""\
compose-go's `UnitBytes` takes an int or a string; a float is dropped without a word, so the
service runs in the 64 MiB default it was meant to leave. Compose v1 fails at create with
`json: cannot unmarshal number 1500000000.0 into Go struct field ... ShmSize of type int64`.
A unitless fraction is bytes: `"1.5"` gives one 4 KiB page.""",
    fix="""\
Quote the size, with a unit (`"1536m"`) or as integer bytes (`"1500000000"`). The fix writes
the whole number of bytes that was written, quoted.
""",
    fix_safety="""\
Safe for a whole number of at least 1 MiB: `--fix` replaces the plain scalar with the same
number quoted, the bytes the author wrote, which every Compose reads alike. A fraction gets no
applied fix (its intent is unknown).""",
    applies="safe (a whole number of bytes)",
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: 1.5e9
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    command: python train.py
    shm_size: "1500000000"
""",
    ),
)

RULE = Rule(
    code="SHM014",
    name="compose-float-size",
    summary="Compose shm_size written as a float or a fraction: dropped, truncated or rejected",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("compose",),
    why=(
        "A YAML float in shm_size is silently dropped by Compose v2 (the 64 MiB default applies), "
        "fails at create in Compose v1, and a unitless fraction is one byte."
    ),
    doc=DOC,
    check=check,
)

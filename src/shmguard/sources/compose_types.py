"""Compose scalars typed as each Compose implementation's parser types them, and the bytes it
applies for a size field.

* **Compose v2** (compose-go on go-yaml v3): YAML 1.2 core resolution, as go-yaml v3's
  ``resolve``: ``true``/``false`` (any case of those two) are bools, ``null``/``~``/empty null,
  integers through Go's ``strconv.ParseInt(s, 0, 64)`` after removing ``_`` (so ``0x10``,
  ``0o17`` and the 1.1-style octal ``012`` = 10), floats matching YAML's float pattern
  (``1.5e9``, ``2147483648.0``, ``.inf``). ``on``/``yes`` are strings. ``types.UnitBytes``
  takes an int, or a string (``ParseInt`` then go-units v0.5 ``RAMInBytes``); a float is
  silently dropped, so the runtime default applies (config_formats.md 2.2, [run]).
* **Compose v1** (docker-compose 1.29, PyYAML 5.4, YAML 1.1): ``1.5e9`` is a *string* (1.1's
  float needs a dot), ``on`` a bool, ``012`` octal 10; strings are parsed by docker-py
  ``parse_bytes`` (units b/k/m/g, a bare number as bytes: ``"1.5e9"`` -> 1,500,000,000), a
  float fails at create with a JSON error (runtime_truth.md E).
* **podman-compose** 1.6 (PyYAML too): passes ``str(value)`` to ``podman --shm-size`` when the
  value is truthy: an integer ``0`` is dropped (Podman's default 65,536,000), the string
  ``"0"`` means unlimited, ``1.5e+9`` (a float) becomes ``1500000000.0`` and is applied,
  ``"1.5e9"`` is rejected by Podman's go-units v0.4 (runtime_truth.md F, G).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from shmguard.sources.yamlnode import YScalar
from shmguard.units import SIZE_MAX_CHARS, SizeError, check_size_length, parse_docker_size

#: go-yaml v3 ``yamlStyleFloat``.
_YAML12_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INF = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"}
_NAN = {".nan", ".NaN", ".NAN"}
_DOCKER_PY_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def yaml12(node: YScalar) -> Any:
    """The value go-yaml v3 (compose-go) decodes: bool, int, float, None or str."""
    if not node.plain:
        return node.value
    s = node.value
    if s in ("", "~", "null", "Null", "NULL"):
        return None
    if s in ("true", "True", "TRUE"):
        return True
    if s in ("false", "False", "FALSE"):
        return False
    plain = s.replace("_", "")
    as_int = _go_parse_int(plain)
    if as_int is not None:
        return as_int
    if _YAML12_FLOAT.match(plain):
        return float(plain)
    if s in _INF:
        return -math.inf if s.startswith("-") else math.inf
    if s in _NAN:
        return math.nan
    return s


def _go_parse_int(s: str) -> int | None:
    """``strconv.ParseInt(s, 0, 64)``: sign, then ``0x``/``0o``/``0b``, a leading ``0`` for
    octal, else decimal; None when it does not parse or overflows int64 (or is longer than
    :data:`~shmguard.units.SIZE_MAX_CHARS`, which no int64 is)."""
    if len(s) > SIZE_MAX_CHARS:
        return None
    m = re.fullmatch(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)", s)
    if not m:
        return None
    digits = m.group(2)
    low = digits[:2].lower()
    base = {"0x": 16, "0o": 8, "0b": 2}.get(low)
    if base is not None:
        value = int(digits[2:], base)
    elif len(digits) > 1 and digits[0] == "0":
        value = int(digits, 8)
    else:
        value = int(digits)
    value = -value if m.group(1) == "-" else value
    return value if -(2**63) <= value < 2**63 else None


def typed(node: YScalar, compose: str) -> Any:
    """The scalar as the ``compose`` implementation (``v2``, ``v1``, ``podman-compose``)
    reads it."""
    return yaml12(node) if compose == "v2" else node.yaml11()


@dataclass(frozen=True)
class Applied:
    """What a Compose implementation does with a size field.

    Attributes:
        value: the typed value it read.
        bytes: the bytes it applies; None when the field is dropped, rejected, or unknown.
        outcome: ``applied``, ``default`` (dropped or 0: the runtime's default), ``unlimited``
            (Podman's 0), or ``error``.
        detail: the error or why it was dropped, in the tool's words where known.
    """

    value: Any
    bytes: int | None
    outcome: str
    detail: str = ""


def docker_py_parse_bytes(s: str) -> int:
    """docker-py ``utils.parse_bytes`` (Compose v1): units b/k/m/g (a trailing ``b`` after a
    unit letter dropped), a bare number as bytes, ``int(float(digits) * unit)``.

    Raises:
        SizeError: docker-py's "should specify the units" for any other suffix; "too long" past
            :data:`~shmguard.units.SIZE_MAX_CHARS` characters; "out of range" for a number
            ``float()`` reads as infinite (``1e999``: docker-py's ``int(inf)`` is an
            OverflowError).
    """
    check_size_length(s)
    if not s:
        return 0
    if len(s) >= 2 and s[-2].isalpha() and s[-1] in "bB":
        s = s[:-1]
    suffix = s[-1].lower()
    digits = s if suffix.isdigit() else s[:-1]
    mul = 1 if suffix.isdigit() else _DOCKER_PY_UNITS.get(suffix)
    if mul is None:
        raise SizeError(f"The specified value for memory ({s}) should specify the units")
    try:
        value = float(digits) * mul
    except ValueError:
        raise SizeError(f"The specified value for memory ({s}) should specify the units") from None
    if not math.isfinite(value):
        raise SizeError(f"The specified value for memory ({s}) is out of range")
    return int(value)


def applied_size(node: YScalar, compose: str) -> Applied:
    """What ``compose`` does with a service size field (``shm_size``) written as ``node``."""
    v = typed(node, compose)
    if isinstance(v, bool) or v is None:
        return Applied(v, None, "error", "must be a number or string")
    if compose == "v2":
        if isinstance(v, float):
            return Applied(v, None, "default", "a YAML float is silently dropped by compose-go")
        if isinstance(v, int):
            return Applied(v, v or None, "applied" if v else "default")
        try:
            check_size_length(v)
            n = int(v) if re.fullmatch(r"[-+]?[0-9]+", v) else parse_docker_size(v)
        except SizeError as e:
            return Applied(v, None, "error", str(e))
        return Applied(v, n or None, "applied" if n else "default")
    if compose == "v1":
        if isinstance(v, float):
            return Applied(v, None, "error", "json: cannot unmarshal number into int64")
        if isinstance(v, int):
            return Applied(v, v or None, "applied" if v else "default")
        try:
            n = docker_py_parse_bytes(v)
        except SizeError as e:
            return Applied(v, None, "error", str(e))
        return Applied(v, n or None, "applied" if n else "default")
    # podman-compose: str(value) to podman (go-units v0.4) when truthy
    if not v:
        return Applied(v, None, "default", "a falsy value is not passed to podman")
    text = str(v)
    try:
        n = parse_docker_size(text, legacy=True)
    except SizeError as e:
        return Applied(v, None, "error", str(e))
    return Applied(v, n or None, "applied" if n else "unlimited")

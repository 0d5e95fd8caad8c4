"""Field readers for signature files: each problem raises :class:`SignatureError` with one
line naming the file and the field (:mod:`shmguard.triage.loader`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from shmguard.units import SizeError, parse_docker_size


class SignatureError(ValueError):
    """A signature file that cannot be used; ``str(err)`` is one line: ``file: field: why``."""


class Validator:
    """Field readers that raise :class:`SignatureError` naming the file and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, why: str) -> Any:
        raise SignatureError(f"{self.source}: {field}: {why}")

    def _f(self, where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def keys(self, t: Mapping[str, Any], allowed: set[str], where: str) -> None:
        for key in t:
            if key not in allowed:
                self.fail(
                    self._f(where, key), f"unknown field; allowed: {', '.join(sorted(allowed))}"
                )

    def string(
        self,
        t: Mapping[str, Any],
        key: str,
        *,
        where: str = "",
        required: bool = True,
        default: str = "",
        pattern: re.Pattern[str] | None = None,
        what: str = "",
    ) -> str:
        f = self._f(where, key)
        if key not in t:
            if required:
                self.fail(f, "missing (required)")
            return default
        val = t[key]
        if not isinstance(val, str) or not val.strip():
            self.fail(f, f"must be a non-empty string, got {type(val).__name__}")
        if pattern is not None and not pattern.match(val):
            self.fail(f, f"{val!r} is not a {what or 'valid value'}")
        return str(val)

    def strings(
        self,
        t: Mapping[str, Any],
        key: str,
        *,
        where: str = "",
        required: bool = False,
        pattern: re.Pattern[str] | None = None,
    ) -> list[str]:
        f = self._f(where, key)
        if key not in t:
            if required:
                self.fail(f, "missing (required)")
            return []
        val = t[key]
        if not isinstance(val, list) or not all(isinstance(x, str) and x for x in val):
            self.fail(f, "must be a list of non-empty strings")
        for x in val:
            if pattern is not None and not pattern.match(x):
                self.fail(f, f"{x!r} is not valid here")
        return list(val)

    def choice(
        self,
        t: Mapping[str, Any],
        key: str,
        allowed: Iterable[str],
        *,
        where: str = "",
        default: str | None = None,
    ) -> str:
        allowed = tuple(allowed)
        f = self._f(where, key)
        if key not in t:
            if default is None:
                self.fail(f, f"missing (required); one of {', '.join(allowed)}")
            return str(default)
        val = t[key]
        if val not in allowed:
            self.fail(f, f"{val!r} is not one of {', '.join(allowed)}")
        return str(val)

    def optional_choice(
        self, t: Mapping[str, Any], key: str, allowed: Iterable[str], *, where: str = ""
    ) -> str | None:
        if key not in t:
            return None
        return self.choice(t, key, allowed, where=where)

    def integer(
        self, t: Mapping[str, Any], key: str, *, where: str = "", default: int, low: int, high: int
    ) -> int:
        f = self._f(where, key)
        val = t.get(key, default)
        if isinstance(val, bool) or not isinstance(val, int) or not low <= val <= high:
            self.fail(f, f"must be an integer from {low} to {high}")
        return int(val)

    def boolean(self, t: Mapping[str, Any], key: str, *, where: str = "") -> bool:
        val = t.get(key, False)
        if not isinstance(val, bool):
            self.fail(self._f(where, key), "must be true or false")
        return bool(val)

    def table(self, t: Mapping[str, Any], key: str, *, where: str = "") -> Mapping[str, Any]:
        val = t.get(key)
        if not isinstance(val, dict):
            self.fail(self._f(where, key), "must be a table")
        return val  # type: ignore[return-value]

    def tables(self, t: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
        val = t.get(key, [])
        if not isinstance(val, list) or not all(isinstance(x, dict) for x in val):
            self.fail(key, f"must be an array of tables ([[{key}]])")
        return list(val)

    def size(self, t: Mapping[str, Any], key: str, where: str) -> int:
        f = self._f(where, key)
        val = t.get(key)
        if not isinstance(val, str):
            self.fail(f, "missing or not a string; write a Docker size such as '1g' or '256m'")
        try:
            n = parse_docker_size(str(val))
        except SizeError as err:
            self.fail(f, str(err))
        if n <= 0:
            self.fail(f, "must be greater than 0")
        return n

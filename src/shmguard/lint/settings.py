"""The configuration with its user-defined checks made rules: the public
:func:`shmguard.load_config`.

:mod:`shmguard.config` reads the file and validates it as plain data; it knows no rule, so it
asks this layer, which has the rule registries, to read ``[[checks]]``
(:func:`read_checks`: a code or name of a built-in rule is refused, :mod:`shmguard.lint.custom`
validates the rest). The errors are :class:`~shmguard.config.ConfigError` lines as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shmguard import config
from shmguard.config import Config, ConfigError

if TYPE_CHECKING:
    from shmguard.lint.config._base import CheckOptions, Unit
    from shmguard.lint.engine import Rule


def read_checks(
    value: object, err: Callable[[str, str], ConfigError], origin: str
) -> tuple[Rule[Unit, CheckOptions], ...]:
    """The rules of the ``checks`` array (:data:`shmguard.config.ChecksReader`), validated
    against the built-in rules of both registries."""
    # imported here: most configurations have no [[checks]], and the registries import every rule
    from shmguard.lint.config import RULES as SHM
    from shmguard.lint.custom import parse_checks
    from shmguard.lint.env import RULES as ENV

    every: tuple[Rule[Any, Any], ...] = (*ENV, *SHM)
    builtin = {r.code: r.name for r in every}
    return parse_checks(value, err, origin, builtin)


def load_config(start: Path | None = None, path: Path | None = None) -> Config:
    """Read the configuration: ``path`` when given, else the nearest one at or above
    ``start`` (default the current directory); the defaults when there is none. User-defined
    checks (``[[checks]]``) become rules in :attr:`Config.checks <shmguard.config.Config>`.

    Raises:
        ConfigError: unreadable file, unknown key or a value of the wrong kind (one line).
    """
    return config.load_config(start, path, read_checks=read_checks)


__all__ = ["Config", "ConfigError", "load_config", "read_checks"]

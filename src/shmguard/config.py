"""The configuration: ``[tool.shmguard]`` in ``pyproject.toml`` or a ``.shmguard.toml``, read once.

Found as ruff finds its own: the nearest directory, from the one given upward, holding a
``.shmguard.toml`` (its top level is the table) or a ``pyproject.toml`` with a
``[tool.shmguard]`` table; ``.shmguard.toml`` wins when both are in one directory. No file means
the defaults. docs/configuration.md lists every key; an example::

    [tool.shmguard]
    select = ["ENV", "SHM"]          # codes or prefixes; default: every rule
    ignore = ["ENV006"]
    fail-on = "warning"              # doctor / check exit 1 at or above it
    extend-exclude = ["vendor"]      # check's walk leaves these out (ruff's semantics)

    [tool.shmguard.severity]         # every workload
    ENV001 = "error"
    [tool.shmguard.severity.ml]      # only PyTorch / NCCL / inference workloads
    ENV010 = "error"

    [tool.shmguard.per-file-ignores]
    "deploy/legacy/*.yaml" = ["SHM"]

    [tool.shmguard.sizes]
    default-shm-size = "2g"          # written when nothing says what the job needs
    headroom = 0.25                  # added to a measured or stated need
    memory-margin = "1g"             # least memory a limit leaves beside a full /dev/shm

    [tool.shmguard.explain]
    signatures = ["ops/signatures"]  # extra signature directories, relative to the file

    [[tool.shmguard.checks]]         # user-defined check rules (shmguard.lint.custom)
    code = "USR001"
    name = "ml-shm-below-2g"
    template = "min-shm-size"
    message = "ML jobs here need at least 2 GiB of /dev/shm"
    params = { size = "2g" }

It also defines, once, the Kubernetes annotation and label names that ``check``, the guard
and the admission webhook read (:data:`ANNOTATIONS`, :data:`LABELS`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from shmguard.estimate.policy import Policy
from shmguard.model.finding import FailOn, Severity
from shmguard.model.target import parse_target
from shmguard.units import DOCKER_DEFAULT_SHM, SizeError, parse_size_flag

#: Workload classes a severity can be keyed by: an ordinary container, a PyTorch / NCCL /
#: inference workload (``ml``), whose jobs die of a small /dev/shm, a browser that tests drive
#: (``browser``: Chrome, Firefox, Selenium, Playwright, Cypress, Puppeteer) or PostgreSQL
#: (``database``): the classes of :data:`shmguard.sources.workload_tokens.CLASSES`.
WORKLOADS = ("container", "ml", "browser", "database")

#: The ``shmguard.io/`` annotation names, read from a pod (template) or a workload object.
ANNOTATIONS: Mapping[str, str] = {
    # the /dev/shm size to give the pod, in Kubernetes quantity syntax ("2Gi")
    "shm-size": "shmguard.io/shm-size",
    # the workload class, overriding detection: "container", "ml", "browser" or "database"
    "workload": "shmguard.io/workload",
    # rule codes or prefixes not to report for this object, comma-separated ("SHM003,ENV")
    "ignore": "shmguard.io/ignore",
    # "true": raise the container memory limit by the shm size when adding /dev/shm
    "raise-memory": "shmguard.io/raise-memory-limit",
    # DataLoader parameters the sizing model reads: "num_workers=4,prefetch_factor=2,..."
    "dataloader": "shmguard.io/dataloader",
    # written by the webhook: what it decided for this pod, in one line
    "decision": "shmguard.io/decision",
    # "true" opts one pod in to the webhook without a GPU request, "false" out
    "inject": "shmguard.io/inject",
}

#: The ``shmguard.io/`` label names.
LABELS: Mapping[str, str] = {
    # on a namespace: "enabled" sends its pods to the webhook (its namespaceSelector)
    "inject": "shmguard.io/inject",
}

#: Names of the files searched, in order of precedence within one directory.
CONFIG_FILES = (".shmguard.toml", "pyproject.toml")

#: Rule code families: ``ENV`` (doctor's environment rules), ``SHM`` (config rules of
#: ``check``) and ``USR`` (user-defined checks of ``check``, ``[[checks]]``). A selector
#: outside them is a typo that would silently disable every rule.
CODE_FAMILIES = ("ENV", "SHM", "USR")
_CODE = re.compile(r"^(" + "|".join(CODE_FAMILIES) + r")[0-9]{0,3}$")
_FULL_CODE = re.compile(r"^(" + "|".join(CODE_FAMILIES) + r")[0-9]{3}$")
#: Bounds of the sizing tunables: headroom as a fraction, sizes in bytes.
MAX_HEADROOM = 10.0
MIN_SIZE = 1 << 20
MAX_SIZE = 1 << 50
_KEYS = {
    "exclude",
    "extend-exclude",
    "force-exclude",
    "select",
    "ignore",
    "fail-on",
    "severity",
    "per-file-ignores",
    "sizes",
    "explain",
    "target",
    "checks",
    "exporter",
}


class ConfigError(ValueError):
    """A configuration file that cannot be used: the message is one line naming the file and
    the key (``pyproject.toml: tool.shmguard.severity.ENV001: expected one of info, ...``)."""


#: Reads the ``checks`` array (a TOML value) into the user-defined checks' rules, or raises
#: what ``err(key, message)`` makes; the third argument is the file's name. The lint layer's
#: :func:`shmguard.lint.settings.read_checks` is the one, which the public
#: :func:`shmguard.load_config` passes (it knows the rule registries; this module does not).
ChecksReader = Callable[[object, Callable[[str, str], ConfigError], str], tuple[Any, ...]]


@dataclass(frozen=True)
class Config:
    """What the configuration says; every field has the default of "no file".

    Attributes:
        path: the file read, or None.
        select: codes or code prefixes to report; empty: all.
        ignore: codes or prefixes never reported (wins over ``select``).
        severity: code -> severity for every workload.
        workload_severity: workload class (:data:`WORKLOADS`) -> code -> severity.
        per_file_ignores: ``(glob, codes)`` pairs; a finding in a file matching the glob
            (relative to the configuration's directory, or its name) is not reported.
        fail_on: the exit threshold, or None for each command's own default.
        policy: the sizing policy's tunables.
        signatures: extra signature directories for ``explain``, absolute.
        target: ``check``'s assumed tools (``docker-cli=28,compose=v2,podman=4.3``; read by
            :func:`shmguard.model.target.parse_target`), or "" for its defaults.
        checks: the user-defined checks (``[[checks]]``), as rules ``check`` runs after its
            own, validated on load by the :data:`ChecksReader` given to :func:`load_config`
            (:func:`shmguard.lint.settings.read_checks`: this module knows no rule).
        exclude: glob patterns ``check``'s walk leaves out (ruff's ``exclude``:
            :mod:`shmguard.sources.exclude`), relative to the file's directory; None: not set
            (ruff's default list).
        extend_exclude: patterns added to ``exclude``.
        force_exclude: the exclusions apply to paths named on the command line too.
    """

    path: Path | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: Mapping[str, Severity] = field(default_factory=dict)
    workload_severity: Mapping[str, Mapping[str, Severity]] = field(default_factory=dict)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fail_on: FailOn | None = None
    policy: Policy = field(default_factory=Policy)
    signatures: tuple[Path, ...] = ()
    target: str = ""
    checks: tuple[Any, ...] = ()
    required_shm: int | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool = False

    def enabled(self, code: str, file: str | None = None) -> bool:
        """Whether findings of ``code`` are reported (in ``file``, when given)."""
        if not (self.select or self.ignore or self.per_file_ignores):
            return True
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        if any(code.startswith(p) for p in self.ignore):
            return False
        if file is not None:
            for pattern, codes in self.per_file_ignores:
                if _matches(file, pattern, self.path) and any(code.startswith(c) for c in codes):
                    return False
        return True

    def severity_for(self, code: str, workload: str | None) -> Severity | None:
        """The configured severity of ``code`` for ``workload``, or None when not set."""
        if workload is not None:
            by_code = self.workload_severity.get(workload, {})
            if code in by_code:
                return by_code[code]
        return self.severity.get(code)


def _matches(file: str, pattern: str, config: Path | None) -> bool:
    candidates = [file, PurePath(file).name]
    if config is not None:
        with contextlib.suppress(ValueError, OSError):  # not under the config's directory
            candidates.append(str(Path(file).resolve().relative_to(config.parent.resolve())))
    return any(fnmatch.fnmatch(c, pattern) for c in candidates)


def find_config(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The nearest configuration file at or above ``start`` and its shmguard table.

    Raises:
        ConfigError: a candidate file cannot be read or is not valid TOML.
    """
    try:
        here = start.resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ConfigError(f"{start}: cannot look for a configuration: {err}") from None
    for directory in (here, *here.parents):
        for name in CONFIG_FILES:
            path = directory / name
            try:
                if not path.is_file():
                    continue
            except OSError as err:  # EACCES on a directory we may not search
                raise ConfigError(
                    f"{path}: cannot look for a configuration: {err.strerror or err}"
                ) from None
            data = _read(path)
            if name == "pyproject.toml":
                table = _tool_table(data, path)
                if table is None:
                    continue
                return path, table
            return path, data
    return None


def _tool_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    """``[tool.shmguard]`` of a pyproject.toml, None when it has none."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: tool: must be a table")
    table = tool.get("shmguard")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.shmguard: must be a table")
    return table


def _read(path: Path) -> dict[str, Any]:
    # imported here: most runs find no configuration file (tomllib compiles regexes)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ConfigError(f"{path}: cannot read the configuration: {why}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


def load_config(
    start: Path | None = None,
    path: Path | None = None,
    *,
    read_checks: ChecksReader | None = None,
) -> Config:
    """Read the configuration: ``path`` when given, else the nearest one at or above
    ``start`` (default the current directory); the defaults when there is none.
    ``read_checks`` reads ``[[checks]]`` (:data:`ChecksReader`); without it a configuration
    that has user-defined checks is refused (:func:`shmguard.load_config` passes it).

    Raises:
        ConfigError: unreadable file, unknown key or a value of the wrong kind (one line).
    """
    if path is not None:
        table: Mapping[str, Any] | None = _read(path)
        if path.name == "pyproject.toml":
            table = _tool_table(table or {}, path)
        return parse_config(table or {}, path, read_checks)
    if start is None:
        try:
            start = Path.cwd()
        except OSError as err:  # the current directory was removed
            raise ConfigError(f"cannot look for a configuration: {err.strerror or err}") from None
    found = find_config(start)
    if found is None:
        return Config()
    return parse_config(found[1], found[0], read_checks)


def parse_config(
    table: Mapping[str, Any], path: Path, read_checks: ChecksReader | None = None
) -> Config:
    """A :class:`Config` from the shmguard table of ``path`` (``read_checks``: as for
    :func:`load_config`).

    Raises:
        ConfigError: unknown key or a value of the wrong kind (one line naming the key).
    """
    prefix = "tool.shmguard." if path.name == "pyproject.toml" else ""

    def err(key: str, what: str) -> ConfigError:
        return ConfigError(f"{path}: {prefix}{key}: {what}")

    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise err(unknown[0], f"unknown key; expected one of {', '.join(sorted(_KEYS))}")
    select = _codes(table.get("select", []), err, "select")
    ignore = _codes(table.get("ignore", []), err, "ignore")
    fail_on = None
    if "fail-on" in table:
        try:
            fail_on = FailOn(table["fail-on"])
        except ValueError:
            choices = ", ".join(f.value for f in FailOn)
            raise err("fail-on", f"expected one of {choices}") from None
    severity, by_workload = _severities(table.get("severity", {}), err)
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise err("per-file-ignores", "must be a table of glob = [codes]")
    per_file = tuple((str(g), _codes(v, err, f"per-file-ignores.{g}")) for g, v in pfi.items())
    return Config(
        path=path,
        select=select,
        ignore=ignore,
        severity=severity,
        workload_severity=by_workload,
        per_file_ignores=per_file,
        fail_on=fail_on,
        policy=_policy(table.get("sizes", {}), err),
        signatures=_signatures(table.get("explain", {}), err, path),
        target=_target(table.get("target", ""), err),
        checks=_checks(table.get("checks", []), err, path, read_checks),
        required_shm=_exporter(table.get("exporter", {}), err),
        exclude=_globs(table["exclude"], err, "exclude") if "exclude" in table else None,
        extend_exclude=_globs(table.get("extend-exclude", []), err, "extend-exclude"),
        force_exclude=_flag(table.get("force-exclude", False), err, "force-exclude"),
    )


def _globs(value: object, err: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise err(key, 'must be a list of glob patterns such as ["vendor", "charts/*/tests"]')
    return tuple(value)


def _flag(value: object, err: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise err(key, "must be true or false")
    return value


def _exporter(table: object, err: Any) -> int | None:
    """``[exporter] required-shm``: a size (``"2g"`` or bytes), or None when absent."""
    if not isinstance(table, dict):
        raise err("exporter", "must be a table")
    unknown = sorted(set(table) - {"required-shm"})
    if unknown:
        raise err(f"exporter.{unknown[0]}", "unknown key; expected required-shm")
    raw = table.get("required-shm")
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise err("exporter.required-shm", 'must be a size such as "2g" or a whole number of bytes')
    try:
        size = raw if isinstance(raw, int) else parse_size_flag(raw)
    except SizeError as e:
        raise err("exporter.required-shm", str(e)) from None
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise err("exporter.required-shm", "must be from 1 MiB to 1 PiB")
    return size


def _checks(
    value: object, err: Any, path: Path, read_checks: ChecksReader | None
) -> tuple[Any, ...]:
    if value == []:
        return ()
    if read_checks is None:
        raise err("checks", "user-defined checks are read by shmguard.load_config")
    return read_checks(value, err, path.name)


def _target(value: object, err: Any) -> str:
    if not isinstance(value, str):
        raise err("target", 'must be a string such as "docker-cli=28,compose=v2,podman=4.3"')
    try:
        parse_target(value)
    except ValueError as e:
        raise err("target", str(e)) from None
    return value


def code_problem(code: str) -> str | None:
    """Why ``code`` is no rule code or prefix (one phrase), or None when it is one: a code
    family (:data:`CODE_FAMILIES`) followed by up to 3 digits (``ENV001``, ``SHM0``, ``ENV``).
    Whether a rule has that code is :func:`shmguard.lint.engine.unknown_codes`'s question."""
    if _CODE.match(code):
        return None
    families = f"{', '.join(CODE_FAMILIES[:-1])} and {CODE_FAMILIES[-1]}"
    return (
        f"{code!r} is not a rule code or prefix: rules are {families} "
        "followed by 3 digits (ENV001, SHM0, ENV)"
    )


def _codes(value: object, err: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise err(key, "must be a list of rule codes or prefixes")
    problem = next((p for p in map(code_problem, value) if p is not None), None)
    if problem is not None:
        raise err(key, problem)
    return tuple(value)


def _full_code(code: str, err: Any, key: str) -> None:
    if not _FULL_CODE.match(code):
        raise err(f"{key}.{code}", "a severity is set per rule code, like ENV001")


def _severity(value: object, err: Any, key: str) -> Severity:
    try:
        return Severity(value)
    except ValueError:
        raise err(key, "expected one of info, warning, error") from None


def _severities(
    table: object, err: Any
) -> tuple[dict[str, Severity], dict[str, dict[str, Severity]]]:
    if not isinstance(table, dict):
        raise err("severity", "must be a table of CODE = severity")
    every: dict[str, Severity] = {}
    by_workload: dict[str, dict[str, Severity]] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            if key not in WORKLOADS:
                raise err(f"severity.{key}", f"unknown workload; expected one of "
                          f"{', '.join(WORKLOADS)}")  # fmt: skip
            by_workload[key] = {}
            for code, sev in value.items():
                _full_code(code, err, f"severity.{key}")
                by_workload[key][code] = _severity(sev, err, f"severity.{key}.{code}")
        else:
            _full_code(key, err, "severity")
            every[key] = _severity(value, err, f"severity.{key}")
    return every, by_workload


def _policy(table: object, err: Any) -> Policy:
    if not isinstance(table, dict):
        raise err("sizes", "must be a table")
    known = {"default-shm-size", "headroom", "memory-margin"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise err(f"sizes.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(known))}")
    base = Policy()
    sizes: dict[str, int] = {}
    for key, default in (
        ("default-shm-size", base.default_shm_size),
        ("memory-margin", base.memory_margin),
    ):
        raw = table.get(key)
        if raw is None:
            sizes[key] = default
            continue
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise err(f"sizes.{key}", 'must be a size such as "1g" or a whole number of bytes')
        try:
            sizes[key] = raw if isinstance(raw, int) else parse_size_flag(raw)
        except SizeError as e:
            raise err(f"sizes.{key}", str(e)) from None
        if not MIN_SIZE <= sizes[key] <= MAX_SIZE:
            raise err(f"sizes.{key}", "must be from 1 MiB to 1 PiB")
        if key == "default-shm-size" and sizes[key] <= DOCKER_DEFAULT_SHM:
            raise err(
                f"sizes.{key}",
                "must be more than 64 MiB, the runtimes' own default it is meant to replace",
            )
    headroom = table.get("headroom", base.headroom)
    if isinstance(headroom, bool) or not isinstance(headroom, int | float):
        raise err("sizes.headroom", "must be a number such as 0.25")
    if not 0 <= headroom <= MAX_HEADROOM:  # also refuses nan
        raise err("sizes.headroom", f"must be a fraction from 0 to {MAX_HEADROOM:g} (0.25 = 25%)")
    try:
        return Policy(float(headroom), sizes["memory-margin"], sizes["default-shm-size"])
    except ValueError as e:
        raise err("sizes.headroom", str(e)) from None


def _signatures(table: object, err: Any, path: Path) -> tuple[Path, ...]:
    if not isinstance(table, dict):
        raise err("explain", "must be a table")
    unknown = sorted(set(table) - {"signatures"})
    if unknown:
        raise err(f"explain.{unknown[0]}", "unknown key; expected signatures")
    dirs = table.get("signatures", [])
    if isinstance(dirs, str):
        dirs = [dirs]
    if not isinstance(dirs, list) or not all(isinstance(x, str) for x in dirs):
        raise err("explain.signatures", "must be a list of directory paths")
    return tuple(path.parent / x for x in dirs)

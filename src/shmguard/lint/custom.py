"""User-defined checks: ``[[tool.shmguard.checks]]`` entries made rules from templates.

As kube-linter's custom checks are a name, a template and its parameters (stackrox/kube-linter
``docs/configuring-kubelinter.md``: the ``customChecks`` section of ``.kube-linter.yaml``), a
user-defined check here is a code in the user range (``USR001``-``USR999``), a kebab-case
name, a severity, a message and one of :data:`TEMPLATES` with its parameters. Each template
is implemented once as a :class:`~shmguard.lint.engine.Rule` factory over the same units
(:class:`~shmguard.lint.config._base.Unit`) as the built-in SHM rules, so select / ignore,
severities, per-file ignores, suppression comments and annotations, baselines and every
output format work for it unchanged.

A check is validated when the configuration is read (:func:`parse_checks`): an unknown
template, a missing or unknown parameter, a size that is not a Docker size (``2g``,
``512m``: :func:`shmguard.units.parse_size_flag`), a code outside ``USR001``-``USR999`` or
used twice, a name used twice or by a built-in rule, or an unknown severity is a one-line
:class:`~shmguard.config.ConfigError` naming the file and the check.

What a unit's /dev/shm is comes from :func:`shmguard.lint.shm_state.shm_state`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    compose_memory_limit,
    container_memory_limit,
    run_memory_limit,
)
from shmguard.lint.engine import FixAvailability, Rule, RuleDoc, Violation
from shmguard.lint.shm_state import shm_state
from shmguard.model.finding import Location, Severity
from shmguard.sources.k8s_model import Container, scalars, text
from shmguard.sources.yamlnode import YMap, YScalar
from shmguard.units import (
    SizeError,
    format_docker_size,
    format_iec,
    parse_size_flag,
)

#: The code family of user-defined checks, and the form of one code.
USER_FAMILY = "USR"
_USER_CODE = re.compile(r"^USR[0-9]{3}$")
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
#: What a unit is, as a check's ``targets`` parameter names it (``Rule.targets`` spelling).
TARGETS = ("compose", "kubernetes", "docker-run", "podman-run")
#: ``workload`` parameter values: a unit's class (:data:`shmguard.config.WORKLOADS`) or any.
WORKLOAD_CHOICES = ("ml", "container", "any")
#: Keys of one ``[[tool.shmguard.checks]]`` entry.
CHECK_KEYS = ("code", "name", "template", "severity", "message", "params")

Err = Callable[[str, str], Exception]


@dataclass(frozen=True)
class Param:
    """One template parameter: its kind (``size``: a Docker size string such as ``"2g"``, read
    to int bytes; ``str``; ``workload``: one of :data:`WORKLOAD_CHOICES`; ``targets``: a list
    of :data:`TARGETS`), whether it is required, its default, and a line of help."""

    name: str
    kind: str
    required: bool
    default: object
    help: str


@dataclass(frozen=True)
class Template:
    """A check template: name, what it flags (one line, also the checks' ``why``), its
    parameters, and the factory of the violations of one unit given the parsed parameters."""

    name: str
    summary: str
    params: tuple[Param, ...]
    violations: Callable[[Unit, Mapping[str, Any]], Iterator[tuple[str, Location | None]]]


def _target_of(unit: Unit) -> str:
    if unit.kind == "run":
        return "podman-run" if unit.run is not None and unit.run.tool == "podman" else "docker-run"
    return unit.kind


def _subjects(unit: Unit, workload: str) -> Iterator[tuple[str, Container | None, Location | None]]:
    """What a check looks at: the unit (Compose service, run line) or each main container of
    a pod of the chosen workload class, with a label for messages and a fallback location."""
    if unit.pod is not None:
        for c, wl in unit.containers:
            if workload in ("any", wl.cls):
                yield f"container {c.name or '?'}: ", c, c.node.location()
        return
    if workload not in ("any", unit.workload.cls):
        return
    if unit.service is not None:
        key = unit.service.key
        yield "", None, key.location() if key is not None else None
    elif unit.run is not None:
        rl = unit.run
        line, col = unit.src.line_col(rl.start)
        yield "", None, Location(unit.file, line, col, start=rl.start, end=rl.end)


def _min_size(unit: Unit, p: Mapping[str, Any]) -> Iterator[tuple[str, Location | None]]:
    for label, c, at in _subjects(unit, p["workload"]):
        st = shm_state(unit, c)
        if st.kind in ("size", "default") and st.bytes is not None and st.bytes < p["size"]:
            yield f"{label}{st.what} is below {format_iec(p['size'])}", st.location or at


def _max_size(unit: Unit, p: Mapping[str, Any]) -> Iterator[tuple[str, Location | None]]:
    for label, c, at in _subjects(unit, p["workload"]):
        st = shm_state(unit, c)
        if st.kind == "size" and st.bytes is not None and st.bytes > p["size"]:
            yield f"{label}{st.what} is above {format_iec(p['size'])}", st.location or at
        elif st.kind == "unbounded":
            yield f"{label}{st.what}: bounded only by memory", st.location or at


def _memory_limit(unit: Unit, p: Mapping[str, Any]) -> Iterator[tuple[str, Location | None]]:
    for label, c, at in _subjects(unit, p["workload"]):
        if c is not None:
            if container_memory_limit(c) is None:
                yield f"{label}no resources.limits.memory", at
        elif unit.service is not None and compose_memory_limit(unit) is None:
            yield "no mem_limit or deploy.resources.limits.memory", at
        elif unit.run is not None and run_memory_limit(unit) is None:
            yield "no --memory", at


def _ipc_host(unit: Unit, p: Mapping[str, Any]) -> Iterator[tuple[str, Location | None]]:
    seen = False
    for label, c, at in _subjects(unit, p["workload"]):
        st = shm_state(unit, c)
        if st.kind == "shared" and st.what in ("ipc: host", "--ipc=host", "hostIPC: true"):
            if not seen:  # hostIPC is the pod's: once per pod
                yield f"{'' if c is not None else label}{st.what}", st.location or at
            seen = True


def _meta(unit: Unit) -> dict[str, tuple[str, Location | None]]:
    out: dict[str, tuple[str, Location | None]] = {}
    if unit.pod is not None:
        for table in (unit.pod.labels, unit.pod.annotations):
            for k, v in table.items():
                if isinstance(v, YScalar):
                    out[k] = (v.value, v.location())
    elif unit.service is not None:
        labels = unit.service.get("labels")
        if isinstance(labels, YMap):
            for k, (_, v) in labels.entries.items():
                out[k] = (text(v) or "", v.location())
        else:
            for s in scalars(labels):
                if isinstance(s, YScalar):
                    k, _, val = s.value.partition("=")
                    out[k] = (val, s.location())
    elif unit.run is not None:
        for f in unit.run.get("--label"):
            k, _, val = (f.value or "").partition("=")
            out[k] = (val, None)
    return out


def _annotation(unit: Unit, p: Mapping[str, Any]) -> Iterator[tuple[str, Location | None]]:
    subjects = list(_subjects(unit, p["workload"]))
    if not subjects:
        return
    at = unit.pod.node.location() if unit.pod is not None else subjects[0][2]
    found = _meta(unit).get(p["key"])
    if found is None:
        yield f"no {p['key']} annotation or label", at
    elif p["value"] and found[0] != p["value"]:
        yield f"{p['key']} is {found[0]!r}, not {p['value']!r}", found[1] or at


def _p(name: str, kind: str, default: object = None, help: str = "") -> Param:
    return Param(name, kind, default is None and kind != "str", default, help)


_WL = "which units: ml (PyTorch / NCCL / inference), container, or any"
_TG = "which kinds of unit: compose, kubernetes, docker-run, podman-run (default all)"

#: The templates, by name.
TEMPLATES: Mapping[str, Template] = {
    t.name: t
    for t in (
        Template(
            "min-shm-size",
            "/dev/shm smaller than a minimum, the runtime's default (nothing set) included",
            (_p("size", "size", help="the least /dev/shm, a Docker size (2g)"),
             _p("workload", "workload", "ml", _WL), _p("targets", "targets", TARGETS, _TG)),
            _min_size,
        ),
        Template(
            "max-shm-size",
            "/dev/shm larger than a maximum, or a memory-backed emptyDir with no sizeLimit",
            (_p("size", "size", help="the most /dev/shm, a Docker size (16g)"),
             _p("workload", "workload", "any", _WL), _p("targets", "targets", TARGETS, _TG)),
            _max_size,
        ),
        Template(
            "require-memory-limit",
            "a unit without a memory limit (mem_limit, --memory, resources.limits.memory)",
            (_p("workload", "workload", "ml", _WL), _p("targets", "targets", TARGETS, _TG)),
            _memory_limit,
        ),
        Template(
            "forbid-ipc-host",
            "the host's IPC namespace (ipc: host, --ipc=host, hostIPC: true)",
            (_p("workload", "workload", "any", _WL), _p("targets", "targets", TARGETS, _TG)),
            _ipc_host,
        ),
        Template(
            "require-annotation",
            "a unit without an annotation or label (Compose labels, --label, Kubernetes "
            "annotations and labels), or with another value",
            (_p("key", "key", help="the annotation or label name (shmguard.io/shm-size)"),
             _p("value", "str", "", "the value it must have (default: any)"),
             _p("workload", "workload", "any", _WL), _p("targets", "targets", TARGETS, _TG)),
            _annotation,
        ),
    )
}  # fmt: skip


def _param(p: Param, value: object, err: Err, key: str) -> object:
    if p.kind in ("size",):
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise err(key, 'must be a size such as "2g" or a whole number of bytes')
        if isinstance(value, int):
            return value
        try:
            return parse_size_flag(value)
        except SizeError as e:
            raise err(key, str(e)) from None
    if p.kind == "workload":
        if value not in WORKLOAD_CHOICES:
            raise err(key, f"expected one of {', '.join(WORKLOAD_CHOICES)}")
        return value
    if p.kind == "targets":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(v in TARGETS for v in value):
            raise err(key, f"must be a list of {', '.join(TARGETS)}")
        return tuple(value)
    if not isinstance(value, str) or (p.kind == "key" and not value.strip()):
        raise err(key, "must be a non-empty string" if p.kind == "key" else "must be a string")
    return value


def make_rule(
    code: str, name: str, severity: Severity, message: str, template: Template,
    params: Mapping[str, Any], origin: str,
) -> Rule[Unit, CheckOptions]:  # fmt: skip
    """The rule of one user-defined check: ``template`` over units with ``params`` (parsed),
    whose findings say ``message: <what was seen>``; ``origin`` (the configuration file)
    goes into its documentation."""
    targets: tuple[str, ...] = params["targets"]

    def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
        if _target_of(unit) not in targets:
            return
        for detail, at in template.violations(unit, params):
            yield Violation(f"{message}: {detail}", at)

    shown = ", ".join(f"{k} = {_show(v)}" for k, v in params.items())
    doc = RuleDoc(
        what=f"User-defined check from {origin}: template `{template.name}` ({template.summary}) "
        f"with {shown}. Nothing set means the runtime's default: 64 MiB (moby "
        "`DefaultShmSize`; Kubernetes pods get their container runtime's), 65,536,000 bytes "
        "for Podman (`containers.conf(5)` `shm_size`).",
        why=message,
        example=f'```toml\n[[checks]]\ncode = "{code}"\nname = "{name}"\n'
        f'template = "{template.name}"\nseverity = "{severity.value}"\n'
        f'message = "{message}"\nparams = {{ {shown} }}\n```',
        fix="Change the file as the message says, or the check in the configuration.",
        fix_safety="User-defined checks print no fix.",
    )
    return Rule(
        code=code,
        name=name,
        summary=message,
        severity=severity,
        fix=FixAvailability.NONE,
        targets=targets,
        why=f"{template.summary} ({origin}).",
        doc=doc,
        check=check,
    )


def _show(v: object) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(f'"{x}"' for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool):
        return f'"{format_docker_size(v)}"'
    return f'"{v}"'


def parse_checks(
    value: object, err: Err, origin: str, builtin: Mapping[str, str]
) -> tuple[Rule[Unit, CheckOptions], ...]:
    """The rules of the ``checks`` array of a configuration, validated.

    Args:
        value: the ``checks`` value (a TOML array of tables).
        err: makes the one-line error for a key (``checks[0].params.size``) and a message.
        origin: the configuration file's name, for the rules' documentation.
        builtin: the built-in rules' code -> name (a user check may reuse neither).

    Raises:
        whatever ``err`` makes: a :class:`~shmguard.config.ConfigError`.
    """
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise err("checks", "must be an array of tables ([[checks]])")
    out: list[Rule[Unit, CheckOptions]] = []
    names = {n: c for c, n in builtin.items()}
    for i, table in enumerate(value):
        code = table.get("code")
        where = f"checks[{i}]" + (f" ({code})" if isinstance(code, str) else "")
        unknown = sorted(set(table) - set(CHECK_KEYS))
        if unknown:
            raise err(f"{where}.{unknown[0]}", f"unknown key; expected one of "
                      f"{', '.join(CHECK_KEYS)}")  # fmt: skip
        for key in ("code", "name", "template", "message"):
            if not isinstance(table.get(key), str) or not table[key].strip():
                raise err(f"{where}.{key}", "required: a non-empty string")
        code, name, message = table["code"], table["name"], table["message"].strip()
        if code in builtin:
            raise err(f"{where}.code", f"{code} is a built-in rule; user checks are USR001-USR999")
        if not _USER_CODE.match(code):
            raise err(f"{where}.code", "user checks have codes USR001-USR999")
        if any(r.code == code for r in out):
            raise err(f"{where}.code", f"{code} is given to two checks")
        if not _NAME.match(name):
            raise err(f"{where}.name", "must be kebab-case (min-shm-2g)")
        if name in names or any(r.name == name for r in out):
            other = names.get(name) or next(r.code for r in out if r.name == name)
            raise err(f"{where}.name", f"{name} is already the name of {other}")
        try:
            severity = Severity(table.get("severity", "warning"))
        except ValueError:
            raise err(f"{where}.severity", "expected one of info, warning, error") from None
        template = TEMPLATES.get(table["template"])
        if template is None:
            raise err(f"{where}.template", f"unknown template {table['template']!r}; expected "
                      f"one of {', '.join(TEMPLATES)}")  # fmt: skip
        given = table.get("params", {})
        if not isinstance(given, dict):
            raise err(f"{where}.params", "must be a table")
        known = {p.name: p for p in template.params}
        extra = sorted(set(given) - set(known))
        if extra:
            raise err(f"{where}.params.{extra[0]}", f"unknown parameter of {template.name}; "
                      f"expected {', '.join(known)}")  # fmt: skip
        params: dict[str, Any] = {}
        for p in template.params:
            if p.name not in given:
                if p.required:
                    raise err(f"{where}.params.{p.name}",
                              f"required by {template.name}: {p.help}")  # fmt: skip
                params[p.name] = p.default
                continue
            params[p.name] = _param(p, given[p.name], err, f"{where}.params.{p.name}")
        out.append(make_rule(code, name, severity, message, template, params, origin))
    return tuple(out)

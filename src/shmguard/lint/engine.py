"""The one rule engine: rules yield violations; the engine makes findings of them.

A rule is one module with metadata (:class:`Rule`: code, name, summary, default severity,
fix availability, targets, documentation) and a pure ``check(subject, options)`` that yields
:class:`Violation` values: what is wrong, where, and the fix. The engine, not the rule, decides
whether a violation is reported (``select`` / ``ignore`` / per-file ignores) and at which
severity (:func:`resolve_severity`: configuration, keyed by rule code and workload class, over
the rule's defaults). Two families run through it: ``doctor``'s environment rules
(:mod:`shmguard.lint.env`) over host facts, and ``check``'s configuration rules
(:mod:`shmguard.lint.config`, with the configuration's user-defined checks) over the units of
parsed config sources (:func:`shmguard.lint.check.check_loaded`), never over the host they run
on. A configuration rule's documentation carries a whole bad and a whole good example file
(:class:`Example`), which tests/lint/test_rule_examples.py checks.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shmguard.config import WORKLOADS, Config
from shmguard.model.finding import Finding, Fix, Location, Severity

S = TypeVar("S")
O = TypeVar("O")  # noqa: E741


class FixAvailability(str, enum.Enum):
    """Whether a rule's findings carry a fix (ruff's ``FixAvailability``)."""

    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NONE = "none"


@dataclass(frozen=True)
class Example:
    """A whole file that shows a rule's documentation at work.

    Attributes:
        file: the file's name, which tells ``check`` how to read it, as it would a real file
            of that name (``compose.yaml``, ``pod.yaml``, ``run.sh``, ``daemon.json``,
            ``task-definition.json``).
        text: the file's content.
    """

    file: str
    text: str

    @property
    def language(self) -> str:
        """The Markdown code-block language for :attr:`file` (empty when none fits)."""
        name = self.file.lower()
        for ends, lang in ((".yaml", "yaml"), (".yml", "yaml"), (".json", "json"), (".sh", "sh")):
            if name.endswith(ends):
                return lang
        return "dockerfile" if name.endswith("dockerfile") else ""


@dataclass(frozen=True)
class RuleDoc:
    """The user documentation of a rule; docs/rules-*.md is generated from it.

    Attributes:
        what: "What it detects": the condition, with the facts it reads and their sources.
        why: "Why is this bad?": what happens to the job.
        fix: "Fix": what to change, in the runtimes' own syntax.
        fix_safety: "Fix safety": what the printed or applied fix may change beyond the finding.
        example: an example of the problem as Markdown (a command and its output, or a
            configuration excerpt): environment rules and user-defined checks.
        bad: a whole file the rule reports (configuration rules: tests/lint/test_rule_examples.py
            checks that ``check`` reports the rule in it).
        good: the same file fixed (the test checks that ``check`` reports nothing in it, and
            that the rule's fix, where it is applied, writes exactly this file).
        applies: how the findings' fixes apply, one line for the rule tables (``safe``,
            ``display-only``, ``safe (your size) / unsafe (the default)``); empty: the
            rule's :class:`FixAvailability`.
        variant_words: what each of :attr:`Rule.variants` is, in words for the tables
            (``"on Podman lines"``); a variant not named here is shown by its name.
    """

    what: str
    why: str
    fix: str
    fix_safety: str
    example: str = ""
    bad: Example | None = None
    good: Example | None = None
    applies: str = ""
    variant_words: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    """What a rule's check yields: the message, where, and how to fix it.

    ``variant`` names a documented special case whose default severity differs
    (:attr:`Rule.variants`, e.g. ``bare-host``); None for the rule's usual case.
    """

    message: str
    location: Location | None = None
    fix: Fix | None = None
    variant: str | None = None


@dataclass(frozen=True, kw_only=True)
class Rule(Generic[S, O]):
    """One rule: metadata plus ``check(subject, options) -> Iterator[Violation]`` (no I/O),
    given by keyword (``Rule(code=CODE, name=NAME, ..., check=check)``).

    Attributes:
        code: stable, never reused (``ENV001``).
        name: kebab-case name of the bad pattern.
        summary: one line for tables.
        severity: default severity.
        fix: whether findings carry a fix.
        targets: what it checks (``host``; ``compose``, ``kubernetes``... for config rules).
        why: the one-sentence "why" every finding carries.
        doc: the user documentation.
        check: the pure check.
        by_workload: default severity per workload class where it differs from ``severity``.
        variants: default severity of a documented special case (:attr:`Violation.variant`).
    """

    code: str
    name: str
    summary: str
    severity: Severity
    fix: FixAvailability
    targets: tuple[str, ...]
    why: str
    doc: RuleDoc
    check: Callable[[S, O], Iterator[Violation]]
    by_workload: Mapping[str, Severity] = field(default_factory=dict)
    variants: Mapping[str, Severity] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [w for w in self.by_workload if w not in WORKLOADS]
        if unknown:
            raise ValueError(f"{self.code}: unknown workload {unknown[0]!r}")


def resolve_severity(
    rule: Rule[S, O], variant: str | None, workload: str | None, config: Config
) -> Severity:
    """The severity of one violation, first that applies: the configuration for this workload
    class and code, the configuration for the code, the rule's default for the variant, the
    rule's default for the workload class, the rule's default."""
    configured = config.severity_for(rule.code, workload)
    if configured is not None:
        return configured
    if variant is not None and variant in rule.variants:
        return rule.variants[variant]
    if workload is not None and workload in rule.by_workload:
        return rule.by_workload[workload]
    return rule.severity


def unknown_codes(
    config: Config, rules: Iterable[Rule[S, O]], *, every_family: bool = False
) -> tuple[str, ...]:
    """Codes and prefixes in ``config`` (select, ignore, severities, per-file ignores) of the
    families ``rules`` cover (``ENV`` for doctor's) that match none of them: a typo such as
    ``ENV01O`` or ``ENV999`` would otherwise leave a rule on, or its severity unchanged, without
    a word. Codes of other families belong to other commands (the configuration file is
    shared) and are not judged here, unless ``every_family``: for a command's own
    ``--select`` / ``--ignore``, where ``ENV001`` given to ``check`` names no rule it runs."""
    codes = [r.code for r in rules]
    families = {c.rstrip("0123456789") for c in codes}
    if every_family:
        families = {""}
    used = [
        *config.select,
        *config.ignore,
        *config.severity,
        *(c for by_code in config.workload_severity.values() for c in by_code),
        *(c for _, cs in config.per_file_ignores for c in cs),
    ]
    bad = [
        u
        for u in used
        if any(u.startswith(f) for f in families) and not any(c.startswith(u) for c in codes)
    ]
    return tuple(dict.fromkeys(bad))


def run_rules(
    rules: Iterable[Rule[S, O]],
    subject: S,
    options: O,
    *,
    config: Config | None = None,
    workload: str | None = None,
) -> tuple[Finding, ...]:
    """Run ``rules`` over ``subject`` and return the reported findings, most severe first,
    then by code, then by position.

    Args:
        rules: the rules to run (a registry tuple).
        subject: what they check (host facts, a parsed config source).
        options: the rules' options.
        config: selection and severities (default: none configured).
        workload: the workload class of the subject (:data:`~shmguard.config.WORKLOADS`), or
            None when unknown.
    """
    config = config or _NO_CONFIG
    out: list[Finding] = []
    # (Config.enabled's own first test, made once: most runs select and ignore nothing)
    selects = bool(config.select or config.ignore or config.per_file_ignores)
    for rule in rules:
        if selects and not config.enabled(rule.code):
            continue
        for v in rule.check(subject, options):
            file = v.location.file if v.location is not None else None
            if file is not None and not config.enabled(rule.code, file):
                continue
            severity = resolve_severity(rule, v.variant, workload, config)
            out.append(
                Finding(rule.code, rule.name, severity, v.message, rule.why, v.location, v.fix)
            )
    out.sort(key=lambda f: (-f.severity.rank, f.code, _pos(f.location)))
    return tuple(out)


#: The configuration of "no file" (frozen, so one instance serves every call).
_NO_CONFIG = Config()


def _pos(loc: Location | None) -> tuple[str, int, int]:
    if loc is None:
        return ("", 0, 0)
    return (loc.file or "", loc.line or 0, loc.column or 0)

"""Load and validate signature files (TOML, one signature per file).

The format is documented in docs/signatures.md. Every problem raises
:class:`SignatureError` with one line naming the file and the field, e.g.
``my.toml: patterns[1].regex: unbalanced parenthesis at position 4``.
"""

from __future__ import annotations

import importlib
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from shmguard.triage._validate import SignatureError as SignatureError
from shmguard.triage._validate import Validator
from shmguard.triage.model import (
    CONFIDENCES,
    LOG_RUNTIMES,
    MODELLED_KINDS,
    REMEDIES,
    ROLES,
    RUNTIMES,
    UNITS,
    Boost,
    FixSpec,
    Pattern,
    Signature,
    SizeRule,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_KIND = re.compile(r"^[a-z0-9_]+$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
#: Shortest literal accepted: shorter ones make the pre-filter fire on noise.
MIN_LITERAL = 3
#: Largest signature file accepted (the built-in ones are 1-4 KiB).
MAX_FILE_BYTES = 1 << 20

_TOP_KEYS = {
    "id", "title", "kind", "also", "role", "confidence", "remedy", "cause", "decide",
    "runtime", "explained_by", "boost", "references", "size", "fix", "priority", "patterns",
    "host_shm", "shm", "sigbus", "state_only",
}  # fmt: skip
_PATTERN_KEYS = {
    "name", "literal", "regex", "variant", "confidence", "note", "runtime", "after",
    "within", "marker", "units",
}  # fmt: skip


def builtin_dir() -> Path:
    """The packaged catalogue directory (``shmguard/triage/signatures``)."""
    return Path(str(resources.files("shmguard.triage") / "signatures"))


def load_catalogue(extra_dirs: Iterable[Path] = ()) -> tuple[Signature, ...]:
    """The built-in signatures plus those in ``extra_dirs`` (``*.toml``, sorted by name).

    Raises:
        SignatureError: a bad file, a duplicate id, or a reference to an unknown id.
    """
    sigs = list(load_dir(builtin_dir()))
    for d in extra_dirs:
        if not d.is_dir():
            raise SignatureError(f"{d}: not a directory of signature files")
        found = load_dir(d)
        if not found:
            raise SignatureError(f"{d}: no *.toml signature files in this directory")
        sigs.extend(found)
    check_catalogue(sigs)
    return tuple(sigs)


def load_dir(directory: Path) -> list[Signature]:
    """Every ``*.toml`` file of ``directory``, in name order.

    Raises:
        SignatureError: for the first bad file.
    """
    return [load_file(p) for p in sorted(directory.glob("*.toml"))]


def load_file(path: Path) -> Signature:
    """Parse and validate one signature file.

    Raises:
        SignatureError: unreadable file, TOML syntax error, or a bad field.
    """
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            # A FIFO would block and a device (a link to /dev/zero) never ends.
            raise SignatureError(f"{path}: not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise SignatureError(
                f"{path}: {st.st_size:,} bytes; a signature file is at most "
                f"{MAX_FILE_BYTES:,} bytes"
            )
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise SignatureError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SignatureError(f"{path}: more than {MAX_FILE_BYTES:,} bytes")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise SignatureError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except tomllib.TOMLDecodeError as err:
        raise SignatureError(f"{path}: TOML syntax error: {err}") from None
    return parse_signature(data, str(path))


def parse_signature(data: Mapping[str, Any], source: str) -> Signature:
    """Validate a parsed TOML table and build a :class:`Signature`.

    Raises:
        SignatureError: naming ``source`` and the field.
    """
    v = Validator(source)
    v.keys(data, _TOP_KEYS, "")
    sig_id = v.string(data, "id", pattern=_ID, what="kebab-case id such as 'my-failure'")
    title = v.string(data, "title")
    kind = v.string(data, "kind", pattern=_KIND, what="snake_case kind such as 'dataloader_shm'")
    also = tuple(v.strings(data, "also", pattern=_KIND))
    role = v.choice(data, "role", ROLES, default="cause")
    confidence = v.choice(data, "confidence", ("low", "medium", "high"), default="medium")
    remedy = v.choice(data, "remedy", REMEDIES, default="none" if role != "cause" else None)
    cause = v.string(data, "cause", required=role != "context", default="")
    decide = v.string(data, "decide", required=False, default="")
    runtime = v.optional_choice(data, "runtime", LOG_RUNTIMES)
    explained_by = tuple(v.strings(data, "explained_by", pattern=_ID))
    references = tuple(v.strings(data, "references"))
    priority = v.integer(data, "priority", default=50, low=0, high=100)
    host_shm = v.boolean(data, "host_shm")
    shm, sigbus, state_only = _run_flags(v, data, role)

    boosts = []
    for i, b in enumerate(v.tables(data, "boost")):
        where = f"boost[{i}]"
        v.keys(b, {"when", "confidence"}, where)
        when = tuple(v.strings(b, "when", pattern=_ID, where=where, required=True))
        conf = v.choice(b, "confidence", CONFIDENCES, where=where)
        boosts.append(Boost(when, conf))

    patterns: list[Pattern] = []
    tables = v.tables(data, "patterns")
    if not tables:
        v.fail("patterns", "at least one [[patterns]] table is required")
    for i, table in enumerate(tables):
        patterns.append(_pattern(v, table, f"patterns[{i}]"))
    names = [pat.name for pat in patterns]
    for i, pat in enumerate(patterns):
        if names.count(pat.name) > 1:
            v.fail(f"patterns[{i}].name", f"duplicate pattern name {pat.name!r}")
        if pat.after is not None:
            target = next((q for q in patterns if q.name == pat.after), None)
            if target is None or not target.marker:
                v.fail(f"patterns[{i}].after", f"{pat.after!r} is not a marker pattern here")
    if all(pat.marker for pat in patterns):
        v.fail("patterns", "every pattern is a marker; at least one must be evidence")

    size = None
    if "size" in data:
        size = _size(v, v.table(data, "size"), kind)
    elif remedy == "shm-size":
        v.fail("size", "required when remedy = 'shm-size' (how to choose the size)")
    fix = _fix(v, v.table(data, "fix")) if "fix" in data else None
    if role == "cause" and fix is None:
        v.fail("fix", "required for role = 'cause'")

    return Signature(
        id=sig_id,
        title=title,
        kind=kind,
        role=role,
        confidence=confidence,
        remedy=remedy,
        cause="\n\n".join(_flat(par) for par in cause.split("\n\n") if par.strip()),
        patterns=tuple(patterns),
        source=source,
        also=also,
        decide=_flat(decide),
        runtime=runtime,
        explained_by=explained_by,
        boosts=tuple(boosts),
        references=references,
        size=size,
        fix=fix,
        priority=priority,
        host_shm=host_shm,
        shm=shm,
        sigbus=sigbus,
        state_only=state_only,
    )


def _run_flags(v: Validator, data: Mapping[str, Any], role: str) -> tuple[bool, bool, bool]:
    """``shm``, ``sigbus``, ``state_only``: what a match says of a measured or guarded run
    (:class:`~shmguard.triage.model.Signature`); true only on a cause, and a state is neither
    a SIGBUS nor anything but a /dev/shm one."""
    flags = {key: v.boolean(data, key) for key in ("shm", "sigbus", "state_only")}
    for key, on in flags.items():
        if on and role != "cause":
            v.fail(key, f"only a signature of role = 'cause' can set it (this one is {role!r})")
    if flags["state_only"] and not flags["shm"]:
        v.fail("state_only", "needs shm = true (a state of /dev/shm)")
    if flags["state_only"] and flags["sigbus"]:
        v.fail("state_only", "a state is not a SIGBUS; set one of state_only and sigbus")
    return flags["shm"], flags["sigbus"], flags["state_only"]


def check_catalogue(sigs: Iterable[Signature]) -> None:
    """Cross-file checks: unique ids; ``explained_by``, ``boost.when`` and ``size.when`` name
    known ids.

    Raises:
        SignatureError: naming the file and field.
    """
    by_id: dict[str, Signature] = {}
    for s in sigs:
        if s.id in by_id:
            raise SignatureError(
                f"{s.source}: id: {s.id!r} is already defined in {by_id[s.id].source}"
            )
        by_id[s.id] = s
    for s in by_id.values():
        for ref in s.explained_by:
            if ref not in by_id:
                raise SignatureError(f"{s.source}: explained_by: unknown signature id {ref!r}")
        for i, b in enumerate(s.boosts):
            for ref in b.when:
                if ref not in by_id:
                    raise SignatureError(
                        f"{s.source}: boost[{i}].when: unknown signature id {ref!r}"
                    )
        for ref in s.size.when if s.size is not None else ():
            if ref not in by_id:
                raise SignatureError(f"{s.source}: size.when: unknown signature id {ref!r}")


def _pattern(v: Validator, p: Mapping[str, Any], where: str) -> Pattern:
    v.keys(p, _PATTERN_KEYS, where)
    name = v.string(p, "name", pattern=_NAME, where=where, what="a short name such as 'main-hint'")
    literal = v.string(p, "literal", where=where)
    if len(literal) < MIN_LITERAL:
        v.fail(f"{where}.literal", f"must be at least {MIN_LITERAL} characters (pre-filter)")
    if "\n" in literal or "\r" in literal:
        v.fail(f"{where}.literal", "must not contain a line break (matching is per line)")
    text = v.string(p, "regex", where=where, required=False, default="")
    try:
        regex = re.compile(text if text else re.escape(literal))
    except re.error as err:
        v.fail(f"{where}.regex", f"invalid regular expression: {err}")
    if nested_repeat(regex.pattern):
        v.fail(
            f"{where}.regex",
            "a repeated group contains an unbounded repeat (like '(a+)+' or '(\\s+\\S+)*'), "
            "which can backtrack for hours on one line; drop the outer repeat, or make the "
            "inner one possessive ('a++') or atomic ('(?>a+)')",
        )
    units: list[tuple[str, str]] = []
    table = v.table(p, "units", where=where) if "units" in p else {}
    for group, unit in table.items():
        if group not in regex.groupindex:
            v.fail(f"{where}.units.{group}", "no capture group of that name in the regex")
        if unit not in UNITS:
            v.fail(
                f"{where}.units.{group}",
                f"unknown unit {unit!r}; expected one of {', '.join(UNITS)}",
            )
        units.append((group, unit))
    after = v.string(p, "after", where=where, required=False, default="") or None
    within = v.integer(p, "within", where=where, default=0, low=0, high=10_000)
    if after is not None and within == 0:
        v.fail(f"{where}.within", "required (> 0 lines) with 'after'")
    return Pattern(
        name=name,
        literal=literal.encode("utf-8"),
        regex=regex,
        variant=v.string(p, "variant", where=where, required=False, default=""),
        confidence=v.optional_choice(p, "confidence", CONFIDENCES, where=where),
        note=_flat(v.string(p, "note", where=where, required=False, default="")),
        runtime=v.optional_choice(p, "runtime", LOG_RUNTIMES, where=where),
        after=after,
        within=within,
        marker=v.boolean(p, "marker", where=where),
        units=tuple(units),
    )


#: An outer repeat above this count (or unbounded) around an unbounded repeat is refused.
_MAX_OUTER_REPEAT = 8


def nested_repeat(pattern: str) -> bool:
    """True when ``pattern`` (valid Python regex syntax) has an unbounded repeat (``*``,
    ``+``, ``{n,}``, or a count above 64) inside a group that is itself repeated more than
    :data:`_MAX_OUTER_REPEAT` times: the shape behind catastrophic backtracking
    (``^(a+)+$`` on ``aaaa...!`` takes exponential time). Possessive repeats and atomic groups
    do not backtrack and are allowed. Reads the parse tree of Python's own ``re`` parser
    (``re._parser``, ``sre_parse`` before 3.11): a conservative check, it may refuse a
    pattern that would in fact be fast (``(\\d+,)+``).
    """
    parser: Any = importlib.import_module(
        "re._parser" if sys.version_info >= (3, 11) else "sre_parse"
    )
    unbounded_at = 64

    def walk(items: Any, outer: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                _lo, hi, body = av
                unbounded = hi == parser.MAXREPEAT or hi > unbounded_at
                if unbounded and outer:
                    return True
                repeated = hi == parser.MAXREPEAT or hi > _MAX_OUTER_REPEAT
                if walk(body, outer or repeated):
                    return True
            elif name == "SUBPATTERN":
                if walk(av[-1], outer):
                    return True
            elif name == "BRANCH":
                if any(walk(b, outer) for b in av[1]):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT"):
                if walk(av[1], outer):
                    return True
            elif name == "GROUPREF_EXISTS" and any(
                b is not None and walk(b, outer) for b in av[1:]
            ):
                return True
            # POSSESSIVE_REPEAT and ATOMIC_GROUP never backtrack into their body.
        return False

    return walk(parser.parse(pattern), False)


def _size(v: Validator, t: Mapping[str, Any], kind: str) -> SizeRule:
    v.keys(t, {"default", "floor", "need_factor", "basis", "runtimes", "when"}, "size")
    default: int | None = None
    floor: int | None = None
    if kind in MODELLED_KINDS:
        # The DataLoader model (or the sizing policy's default) sizes these: a size written
        # here would never be used, so it is refused rather than silently ignored.
        for key in ("default", "floor"):
            if key in t:
                v.fail(
                    f"size.{key}",
                    f"not used for a {kind} failure (the DataLoader model for the loader the "
                    "log shows, else the sizing policy's default, decides); remove it",
                )
    else:
        default = v.size(t, "default", "size")
        floor = v.size(t, "floor", "size")
    factor = t.get("need_factor")
    if factor is not None and (
        isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1
    ):
        v.fail("size.need_factor", "must be a number >= 1")
    basis = v.string(t, "basis", where="size")
    runtimes = tuple(v.strings(t, "runtimes", where="size"))
    for i, name in enumerate(runtimes):
        if name not in RUNTIMES:
            v.fail(f"size.runtimes[{i}]", f"{name!r} is not one of {', '.join(RUNTIMES)}")
    when = tuple(v.strings(t, "when", pattern=_ID, where="size"))
    factor_f = float(factor) if factor is not None else None
    return SizeRule(default, floor, factor_f, _flat(basis), runtimes, when)


def _flat(text: str) -> str:
    """One paragraph: line breaks and runs of spaces of a TOML multi-line string -> one space."""
    return " ".join(text.split())


def _fix(v: Validator, t: Mapping[str, Any]) -> FixSpec:
    v.keys(t, {"summary", "runtimes", "app", "next"}, "fix")
    summary = v.string(t, "summary", where="fix")
    rt = v.table(t, "runtimes", where="fix") if "runtimes" in t else {}
    pairs = []
    for name, text in rt.items():
        if name not in (*LOG_RUNTIMES, "app"):
            v.fail(
                f"fix.runtimes.{name}",
                f"unknown runtime; expected one of {', '.join((*LOG_RUNTIMES, 'app'))}",
            )
        if not isinstance(text, str) or not text.strip():
            v.fail(f"fix.runtimes.{name}", "must be a non-empty string")
        pairs.append((name, _flat(text)))
    app = tuple(_flat(s) for s in v.strings(t, "app", where="fix"))
    nxt = tuple(_flat(s) for s in v.strings(t, "next", where="fix"))
    return FixSpec(_flat(summary), tuple(pairs), app, nxt)

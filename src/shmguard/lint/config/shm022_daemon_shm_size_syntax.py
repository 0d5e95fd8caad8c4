"""SHM022 daemon-shm-size-syntax: daemon.json ``"default-shm-size"`` given as a JSON number (or
other non-string), or as a string with a Kubernetes suffix.

dockerd reads the field as ``opts.MemBytes``, whose ``UnmarshalJSON`` (moby ``opts/opts.go``)
accepts only a JSON string and fails with ``invalid size: "2147483648"`` otherwise, so the
daemon does not start. The string goes through go-units ``RAMInBytes``: v0.5 (moby 23 and
later) rejects ``2Gi`` (``invalid suffix: 'gi'``); v0.4 (moby 20.10) reads it as binary.
dockerd itself was not run for this rule (the measured versions are of the CLI and Compose).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, edit_fix, replace_scalar, sources
from shmguard.lint.config._predicates import k8s_suffixed
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix
from shmguard.sources.yamlnode import YScalar
from shmguard.units import MiB, format_docker_size


def _number(node: YScalar) -> int | None:
    """The integer a plain JSON number means (``2147483648``, ``2e9``), or None."""
    try:
        v = float(node.value)
    except ValueError:
        return None
    return int(v) if v.is_integer() and v >= 0 else None


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a non-string ``default-shm-size`` and a string with a Kubernetes suffix."""
    dc = unit.daemon
    if dc is None or not isinstance(dc.default_shm_size, YScalar):
        return
    node = dc.default_shm_size
    if node.placeholder:
        return
    if node.style == "plain":
        n = _number(node)
        if n is None:
            yield Violation(
                f'"default-shm-size": {node.raw} is not a JSON string: dockerd fails to start '
                f'(invalid size: {node.raw!r}); write a string such as "2g"',
                node.location(),
            )
            return
        new = format_docker_size(n)
        bytes_like = n >= MiB
        yield Violation(
            f'"default-shm-size": {node.raw} is a JSON number: dockerd fails to start (invalid '
            f'size: "{node.raw}"); write the string "{new}"'
            + ("" if bytes_like else f" if {n:,} bytes is meant (under 1 MiB: check the unit)"),
            node.location(),
            Fix(
                f'Write "{new}"',
                f'Write "{new}": the same {n:,} bytes as a JSON string in go-units syntax.',
                (),  # a daemon default, not a container's setting: nothing for snippets
                (Edit(node.start, node.end, f'"{new}"'),) if bytes_like else (),
                Applicability.SAFE if bytes_like else Applicability.DISPLAY_ONLY,
            ),
        )
        return
    n = k8s_suffixed(node.value)
    if n is None:
        return
    new = format_docker_size(n)
    edit = replace_scalar(node, new)
    yield Violation(
        f'"default-shm-size": "{node.value}" has a Kubernetes suffix: dockerd 23 and later '
        f"reject it (invalid suffix: '{node.value.strip()[-2:].lower()}'); write \"{new}\"",
        node.location(),
        edit_fix(
            f'Write "{new}"',
            f'Write "{new}" (the same bytes: go-units is binary, 1g = 1 GiB).',
            (),
            edit,
        ),
    )


DOC = RuleDoc(
    what=f"""\
Docker's daemon configuration (`/etc/docker/daemon.json`, recognised by its keys) whose
`"default-shm-size"` is not a JSON string (`2147483648`, `2e9`, `true`), or is a string with
a Kubernetes binary suffix (`"2Gi"`). dockerd decodes the field with moby's `opts.MemBytes`
(`opts/opts.go`, `UnmarshalJSON`), which takes only a quoted string and parses it with
docker/go-units `RAMInBytes`: v0.5 (moby 23 and later) rejects `Gi`, v0.4 (moby 20.10) reads it
as binary. These facts come from the source; dockerd was not run for this rule.
Sources: {sources("daemon-json")}.
""",
    why="""\
A number makes dockerd exit at start with `invalid size: "2147483648"`, so no container runs on
the host; a `"2Gi"` written for Docker 20.10 stops the daemon after an upgrade. Either way every
container loses the intended default /dev/shm size.""",
    fix="""\
Write a JSON string in go-units syntax with the same bytes: `2147483648` -> `"2g"`,
`"2Gi"` -> `"2g"` (go-units is binary: `1g` = 1 GiB).
""",
    fix_safety="""\
Safe for a number of at least 1 MiB (read as bytes, the only unit a bare go-units number has)
and for a Kubernetes suffix: the value is replaced in place and means the same bytes, nothing
else in the file changes. Display-only for a number under 1 MiB (the unit may have been meant
otherwise) and for a value that is not a number.""",
    applies="safe / display-only (a number under 1 MiB)",
    bad=Example(
        "daemon.json",
        """\
{
  "default-shm-size": 2147483648
}
""",
    ),
    good=Example(
        "daemon.json",
        """\
{
  "default-shm-size": "2g"
}
""",
    ),
)

RULE = Rule(
    code="SHM022",
    name="daemon-shm-size-syntax",
    summary='daemon.json "default-shm-size" as a number or with a Kubernetes suffix (2Gi)',
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("daemon-json",),
    why=(
        'dockerd reads "default-shm-size" only from a JSON string in go-units syntax: a number '
        "stops the daemon (invalid size), and 2Gi is rejected by dockerd 23 and later."
    ),
    doc=DOC,
    check=check,
)

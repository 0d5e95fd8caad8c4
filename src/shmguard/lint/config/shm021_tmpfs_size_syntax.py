"""SHM021 tmpfs-size-syntax: a tmpfs ``size=`` at /dev/shm that the kernel cannot parse.

``--tmpfs /dev/shm:size=<v>``, Compose ``tmpfs: [/dev/shm:size=<v>]`` and (Podman 4.3, which
passes ``tmpfs-size`` to the kernel unparsed) ``--mount type=tmpfs,...,tmpfs-size=<v>`` hand the
value to the kernel's ``memparse``: a number with an optional ``k|m|g|t|p|e`` or ``%``. ``1gb``,
``8Gi``, ``1.5g`` and ``8 g`` fail at container start with ``data: size=1gb: invalid
argument`` (runtime_truth.md D, E, G; tmpfs(5)). podman-compose turns long-syntax tmpfs
volumes into ``--tmpfs <path>:size=<raw>`` too (runtime_truth.md F).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    flag_loc,
    is_dev_shm,
    mount_target,
    replace_flag_value,
    replace_scalar,
    sources,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.yamlnode import YScalar
from shmguard.units import SizeError, parse_docker_size, parse_tmpfs_size


def kernel_size(n: int) -> str:
    """``n`` bytes in the kernel's syntax: the largest of g/m/k that divides, else bytes."""
    for sfx, shift in (("g", 30), ("m", 20), ("k", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{sfx}"
    return str(n)


def _bad(value: str) -> tuple[str, int | None] | None:
    """None when ``value`` is a valid kernel size; else (value, the bytes Docker's own parser
    reads it as, or None)."""
    try:
        parse_tmpfs_size(value, mem_total=1 << 30)
        return None
    except SizeError:
        pass
    try:
        return value, parse_docker_size(value, legacy=True) or None
    except SizeError:
        return value, None


def _size_option(options: str, key: str = "size") -> tuple[str, int] | None:
    """The ``key=`` value of a comma-separated option list and its offset in it."""
    pos = 0
    for opt in options.split(","):
        k, eq, v = opt.partition("=")
        if eq and k.strip() == key:
            return v, pos + len(k) + 1
        pos += len(opt) + 1
    return None


def _fix(n: int | None, edit: Edit | None) -> Fix:
    new = kernel_size(n) if n else None
    return Fix(
        f"Write size={new}" if new else "Write a kernel size",
        "Write the size as the kernel reads it: a number with k, m or g (binary), or a % of RAM"
        + (f"; {new} is the size written" if new else "")
        + ".",
        (Change(Setting.SHM_SIZE, n),) if n else (),
        (edit,) if edit is not None and new else (),
        Applicability.SAFE if edit is not None and new else Applicability.DISPLAY_ONLY,
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag tmpfs ``size=`` values at /dev/shm the kernel rejects."""
    svc = unit.service
    if svc is not None:
        for m in svc.mounts:
            if not is_dev_shm(m.target):
                continue
            if m.kind == "tmpfs" and isinstance(m.node, YScalar) and m.options:
                found = _size_option(m.options)
                bad = _bad(found[0]) if found else None
                if bad is None:
                    continue
                value, n = bad
                new = (
                    m.node.value.replace(f"size={value}", f"size={kernel_size(n)}", 1) if n else ""
                )
                edit = replace_scalar(m.node, new) if n else None
                yield Violation(
                    f"tmpfs /dev/shm size={value!r}: the kernel rejects it and the container does "
                    "not start",
                    m.node.location(),
                    _fix(n, edit),
                )
            elif (
                options.target.compose == "podman-compose"
                and isinstance(m.size, YScalar)
                and not m.size.placeholder
            ):
                bad = _bad(m.size.value)
                if bad is not None:
                    yield Violation(
                        f"tmpfs.size {m.size.value!r}: podman-compose passes it to the kernel as "
                        "size=, which rejects it (target podman-compose)",
                        m.size.location(),
                        _fix(bad[1], None),
                    )
    rl = unit.run
    if rl is None:
        return
    for f in rl.flags.named("--tmpfs", "--mount"):
        if f.value is None:
            continue
        if f.name == "--tmpfs" and is_dev_shm(f.value.partition(":")[0]):
            found = _size_option(f.value.partition(":")[2])
            tool = ""
        elif f.name == "--mount" and rl.tool == "podman" and is_dev_shm(mount_target(f.value)):
            found = _size_option(f.value, "tmpfs-size")
            tool = f" ({options.target.name('podman')} passes tmpfs-size to the kernel)"
        else:
            continue
        bad = _bad(found[0]) if found else None
        if bad is None:
            continue
        value, n = bad
        edit = None
        if n:
            edit = replace_flag_value(
                unit.src, f, f.value.replace(f"={value}", f"={kernel_size(n)}", 1)
            )
        yield Violation(
            f"{f.name} /dev/shm size {value!r}: the kernel rejects it and the container does not "
            f"start{tool}",
            flag_loc(unit, f),
            _fix(n, edit),
        )


DOC = RuleDoc(
    what=f"""\
A tmpfs at /dev/shm whose `size=` the kernel cannot parse: `--tmpfs /dev/shm:size=1gb`,
Compose `tmpfs: ["/dev/shm:size=8Gi"]`, `size=1.5g`, and on Podman 4.3 (which hands
`tmpfs-size` to the kernel) `--mount type=tmpfs,dst=/dev/shm,tmpfs-size=2Gi`; with
`--target compose=podman-compose` also a long-syntax tmpfs volume's `tmpfs.size`.
Sources: {sources("compose", "docker-run", "podman-run")}; tmpfs(5).
""",
    why="""\
The kernel's `memparse` takes a number with `k`, `m`, `g` (binary) or `%`. Anything else fails
the mount when the container starts: `error mounting "tmpfs" to rootfs at "/dev/shm": ...
data: size=1gb: invalid argument`.""",
    fix="""\
Write the size in the kernel's syntax: `size=8g`, `size=1536m`, or `size=50%`.
""",
    fix_safety="""\
Safe: `--fix` writes the bytes Docker's own size parser reads from the value (`1gb` and `1Gi`
are 1 GiB, `1.5g` is 1536 MiB) in the kernel's syntax, nothing else.""",
    applies="safe",
    bad=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --tmpfs /dev/shm:size=8gb pytorch/pytorch python train.py
""",
    ),
    good=Example(
        "run.sh",
        """\
#!/bin/sh
docker run --tmpfs /dev/shm:size=8g pytorch/pytorch python train.py
""",
    ),
)

RULE = Rule(
    code="SHM021",
    name="tmpfs-size-syntax",
    summary="A tmpfs size= at /dev/shm in a syntax the kernel rejects (1gb, 8Gi, 1.5g)",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("compose", "docker-run", "podman-run"),
    why=(
        "The kernel parses tmpfs size= itself: 1gb, 8Gi or 1.5g make the mount, and so the "
        "container start, fail."
    ),
    doc=DOC,
    check=check,
)

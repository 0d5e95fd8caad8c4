"""SHM029 ecs-shm-size-units: an ECS/Batch ``sharedMemorySize`` or ``tmpfs[].size`` that looks
like bytes or is a string, or /dev/shm sizing in a Fargate task definition.

Both fields are Integers in **MiB** (AWS ECS ``RegisterTaskDefinition`` API reference,
``LinuxParameters``: "The value for the size (in MiB) of the /dev/shm volume. This parameter
maps to the --shm-size option to docker run"; ``Tmpfs.size``: "The maximum size (in MiB) of the
tmpfs volume"). A value of 1,048,576 or more is 1 TiB or more: almost surely bytes pasted from
Docker. A JSON string is refused by the API's Integer type (the AWS CLI's parameter validation:
``Invalid type for parameter ... valid types: <class 'int'>``). AWS documents both fields as
not supported on Fargate ("Amazon ECS task definition differences for the Fargate launch
type": "The devices, sharedMemorySize, and tmpfs parameters are not supported"). Nothing here
was run against AWS.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, edit_fix, replace_scalar, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.jsonfiles import EcsTaskDefinition
from shmguard.sources.k8s_model import scalars, text
from shmguard.sources.yamlnode import YNode, YScalar
from shmguard.units import MiB, SizeError, parse_docker_size, whole_number

#: 1 TiB in MiB: a value at least this large is bytes, not MiB.
BYTES_LIKE = 1024 * 1024


def _fargate(td: EcsTaskDefinition) -> str | None:
    """``requiresCompatibilities`` (ECS) or ``platformCapabilities`` (Batch) when it names
    ``FARGATE``, else None."""
    for field, node in (
        ("requiresCompatibilities", td.compatibilities),
        ("platformCapabilities", td.node.get("platformCapabilities")),
    ):
        if any(s.value.strip().upper() == "FARGATE" for s in scalars(node)):
            return field
    return None


def _mib_of_text(value: str) -> int | None:
    """MiB of a string value when it means an exact number of MiB: digits (already MiB) or a
    go-units size (``2g`` -> 2048); None otherwise."""
    v = value.strip()
    n = whole_number(v)
    if n is not None:
        return n
    try:
        n = parse_docker_size(v)
    except SizeError:
        return None
    return n // MiB if n > 0 and n % MiB == 0 else None


def _check_value(what: str, node: YNode | None, shm: bool) -> Iterator[Violation]:
    if not isinstance(node, YScalar) or node.placeholder:
        return
    change_of = (lambda mib: (Change(Setting.SHM_SIZE, mib * MiB, ("ecs",)),)) if shm else None
    if node.style != "plain":
        mib = _mib_of_text(node.value)
        edit = Edit(node.start, node.end, str(mib)) if mib is not None and mib > 0 else None
        yield Violation(
            f"{what}: {node.raw} is a string; ECS takes an integer of MiB"
            + (f": write {mib}" if mib is not None else ""),
            node.location(),
            edit_fix(
                f"Write {mib}" if mib is not None else "Write an integer of MiB",
                f"Write {mib} (MiB) as a JSON integer."
                if mib is not None
                else "Write the size as a JSON integer of MiB (2048 for 2 GiB).",
                change_of(mib) if change_of and mib else (),
                edit,
            ),
        )
        return
    n = whole_number(node.value)
    if n is None or n < BYTES_LIKE:
        return
    exact = n % MiB == 0
    mib = -(-n // MiB)
    yield Violation(
        f"{what}: {n:,} MiB is {n / 2**20:,.0f} TiB: this looks like bytes; "
        f"{n:,} bytes is {'' if exact else 'about '}{mib} MiB",
        node.location(),
        Fix(
            f"Write {mib}",
            f"Write {mib} (MiB): {n:,} bytes"
            + ("." if exact else f" rounded up to whole MiB ({mib * MiB:,} bytes)."),
            change_of(mib) if change_of else (),
            (r,) if exact and (r := replace_scalar(node, str(mib))) is not None else (),
            Applicability.SAFE if exact else Applicability.DISPLAY_ONLY,
        ),
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag bytes-looking or string sizes, and shm sizing on Fargate."""
    td = unit.ecs
    if td is None:
        return
    fargate = _fargate(td)
    for c in td.containers:
        name = f"container {c.name!r}: " if c.name else ""
        yield from _check_value(
            f"{name}linuxParameters.sharedMemorySize", c.shared_memory_size, True
        )
        for t in c.tmpfs:
            path = text(t.get("containerPath")) or "?"
            what = f"{name}linuxParameters.tmpfs[{path}].size"
            yield from _check_value(what, t.get("size"), False)
        if fargate is None:
            continue
        unsupported = [("sharedMemorySize", c.shared_memory_size)]
        if c.tmpfs:  # one finding for the tmpfs list, at its first entry
            unsupported.append(("tmpfs", c.tmpfs[0]))
        for field, node in unsupported:
            if node is None:
                continue
            yield Violation(
                f"{name}linuxParameters.{field} with FARGATE in {fargate}: Fargate does not "
                "support it (AWS: the devices, sharedMemorySize and tmpfs parameters are not "
                "supported); use EC2 capacity to size /dev/shm",
                node.location(),
            )


DOC = RuleDoc(
    what=f"""\
In an Amazon ECS task definition (or an AWS Batch job definition's `containerProperties`):
`linuxParameters.sharedMemorySize` or a `linuxParameters.tmpfs[].size` that is 1,048,576 or
more (1 TiB when read as MiB, as ECS reads it: almost surely bytes) or a JSON string
(`"2048"`, `"2g"`: the field is an Integer); and `sharedMemorySize` or `tmpfs` in a task
definition whose `requiresCompatibilities` (Batch: `platformCapabilities`) names `FARGATE`.
Sources: the AWS ECS API reference (`LinuxParameters.sharedMemorySize`: "the size (in MiB) of
the /dev/shm volume", mapped to `docker run --shm-size`; `Tmpfs.size` in MiB), the AWS ECS
Developer Guide ("Amazon ECS task definition differences for the Fargate launch type": "The
devices, sharedMemorySize, and tmpfs parameters are not supported"), the AWS Batch job
definition reference; {sources("ecs")}. Nothing was run against AWS.
""",
    why="""\
`sharedMemorySize: 2147483648` asks for a 2 PiB /dev/shm: the container gets a tmpfs far above
its memory limit, which only the limit bounds, instead of the size meant. A string is refused
when the task definition is registered. On Fargate the fields are not supported, so the task
keeps Docker's 64 MiB /dev/shm or fails to register.""",
    fix="""\
Write the size as an integer of MiB: bytes divided by 1,048,576 (`2147483648` -> `2048`),
`"2048"` -> `2048`, `"2g"` -> `2048`. On Fargate, run the task on EC2 capacity to size
/dev/shm (Fargate has no /dev/shm setting).
""",
    fix_safety="""\
Safe when the bytes are an exact number of MiB (or the string an integer or an exact go-units
size): the value is replaced in place with the same bytes; nothing else changes. Display-only
otherwise (the MiB value rounded up is shown) and for the Fargate finding, where the launch
type is the author's choice.""",
    applies="safe (an exact number of MiB) / display-only",
    bad=Example(
        "task-definition.json",
        """\
{
  "family": "train",
  "containerDefinitions": [
    {
      "name": "train",
      "image": "pytorch/pytorch",
      "command": ["python", "train.py"],
      "linuxParameters": {"sharedMemorySize": 2147483648}
    }
  ]
}
""",
    ),
    good=Example(
        "task-definition.json",
        """\
{
  "family": "train",
  "containerDefinitions": [
    {
      "name": "train",
      "image": "pytorch/pytorch",
      "command": ["python", "train.py"],
      "linuxParameters": {"sharedMemorySize": 2048}
    }
  ]
}
""",
    ),
)

RULE = Rule(
    code="SHM029",
    name="ecs-shm-size-units",
    summary="ECS sharedMemorySize / tmpfs size in bytes or as a string (MiB), or set on Fargate",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("ecs",),
    why=(
        "ECS reads sharedMemorySize and tmpfs size as an integer of MiB: bytes give a /dev/shm "
        "of terabytes, a string is refused, and Fargate supports neither field."
    ),
    doc=DOC,
    check=check,
)

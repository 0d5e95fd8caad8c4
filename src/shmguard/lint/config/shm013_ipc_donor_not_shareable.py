"""SHM013 ipc-donor-not-shareable: ``ipc: service:x`` / ``--ipc=container:x`` whose donor keeps
a private IPC namespace, so the joining container never starts.

Docker lets a container join another's IPC namespace (and so its /dev/shm) only when the donor
has a shareable /dev/shm: IpcMode ``shareable`` (or ``host``, or itself joined to a shareable
one). The daemon's default IpcMode is ``private`` (dockerd ``--default-ipc-mode``, moby
``daemon/config`` ``DefaultIpcMode``), and joining such a donor fails at start with
``can't join IPC of container <id>: non-shareable IPC (hint: use IpcMode:shareable for the donor
container)`` (moby ``daemon/container_operations_unix.go`` ``getIPCContainer``; Docker Engine
20.10.24 and Compose 1.29.2 measured: runtime_truth.md A3, C, E). Podman's default IpcMode is
``shareable`` and podman-compose ignores ``ipc:`` (runtime_truth.md F, G): no finding there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.lint.config._base import (
    CheckOptions,
    Unit,
    edit_fix,
    flag_loc,
    insert_key,
    insert_run_flag,
    ipc_mode,
    replace_flag_value,
    replace_scalar,
    sources,
)
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Edit, Fix
from shmguard.sources.compose import ComposeService
from shmguard.sources.k8s_model import text
from shmguard.sources.runline import Flag, RunLine
from shmguard.sources.text import SourceText
from shmguard.sources.workload import Workload
from shmguard.sources.yamlnode import YScalar

#: Donor IPC modes a container cannot join: the daemon default (unset), private and none.
_NOT_SHAREABLE = (None, "private", "none")


def _donor_fix(edit: Edit | None, donor: str, compose: bool) -> Fix:
    setting = "ipc: shareable" if compose else "--ipc=shareable"
    return edit_fix(
        f"Set {setting} on {donor!r}",
        f"Give the donor {donor!r} `{setting}`: its /dev/shm can then be joined (it stays "
        "private to the containers that join it).",
        (),
        edit,
    )


def _compose_donor(svc: ComposeService, ref: str) -> ComposeService | None:
    """The service ``ref`` names: ``service:<name>``, or ``container:<container_name>``."""
    kind, _, name = ref.partition(":")
    name = name.strip()
    for other in svc.file.services:
        if other is svc:
            continue
        if kind.strip().lower() == "service" and other.name == name:
            return other
        if kind.strip().lower() == "container" and text(other.get("container_name")) == name:
            return other
    return None


def _compose(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    svc = unit.service
    assert svc is not None
    if options.target.compose == "podman-compose":
        return  # podman-compose never reads ipc: (runtime_truth.md F)
    ref = text(svc.ipc)
    if ref is None or ipc_mode(ref) != "container" or not isinstance(svc.ipc, YScalar):
        return
    donor = _compose_donor(svc, ref)
    if donor is None:
        return  # a container outside this file: unknown
    donor_ipc = text(donor.ipc)
    mode = ipc_mode(donor_ipc)
    if donor.ipc is not None and (mode is None or mode not in _NOT_SHAREABLE):
        return  # shareable, host, joined, or a placeholder
    edit: Edit | None
    if donor.ipc is None:
        edit = insert_key(donor.node, "ipc: shareable")
    elif mode == "private" and isinstance(donor.ipc, YScalar):
        edit = replace_scalar(donor.ipc, "shareable")
    else:
        edit = None  # ipc: none: the donor has no /dev/shm; giving it one is the author's call
    has = f"ipc: {donor_ipc}" if donor_ipc is not None else "no ipc (the daemon's default, private)"
    yield Violation(
        f"service {svc.name!r} joins the IPC of {donor.name!r}, which has {has}: the start fails "
        "with 'non-shareable IPC (hint: use IpcMode:shareable for the donor container)'",
        svc.ipc.location(),
        _donor_fix(edit, donor.name, True),
    )


def _run_lines(src: SourceText) -> tuple[RunLine, ...]:
    """The run lines of ``src`` (one entry cached: the rule sees the units of a file in turn)."""
    cached = _CACHE.get("src")
    if cached is not None and cached[0] is src:
        return cached[1]
    from shmguard.sources.load import load_bytes

    lines = load_bytes(src.data, src.file).run_lines
    _CACHE["src"] = (src, lines)
    return lines


_CACHE: dict[str, tuple[SourceText, tuple[RunLine, ...]]] = {}


def _name(rl: RunLine) -> str | None:
    f = rl.last("--name")
    return f.value if f is not None else None


def _run(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    rl = unit.run
    assert rl is not None
    if rl.tool == "podman":
        return  # Podman's default IpcMode is shareable (runtime_truth.md G)
    ipc = rl.last("--ipc")
    if ipc is None or ipc.value is None or ipc_mode(ipc.value) != "container":
        return
    name = ipc.value.partition(":")[2].strip()
    if not name or not re.fullmatch(r"[\w][\w.-]*", name):
        return
    donors = [
        d
        for d in _run_lines(unit.src)
        if d.start < rl.start and d.tool != "podman" and _name(d) == name
    ]
    if not donors:
        return  # a container started elsewhere: unknown
    donor = donors[-1]
    dipc: Flag | None = donor.last("--ipc")
    mode = ipc_mode(dipc.value) if dipc is not None else None
    if dipc is not None and (mode is None or mode not in _NOT_SHAREABLE):
        return
    edit: Edit | None
    if dipc is None:
        edit = insert_run_flag(
            Unit(unit.src, "run", Workload("container"), run=donor), "--ipc=shareable"
        )
    elif mode == "private":
        edit = replace_flag_value(unit.src, dipc, "shareable")
    else:
        edit = None
    has = f"--ipc={dipc.value}" if dipc is not None else "no --ipc (the daemon's default, private)"
    yield Violation(
        f"--ipc={ipc.value} joins container {name!r}, started on line {donor.line} with {has}: "
        "the start fails with 'non-shareable IPC (hint: use IpcMode:shareable for the donor "
        "container)'",
        flag_loc(unit, ipc),
        _donor_fix(edit, name, False),
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a container joining the IPC of a donor that is not shareable."""
    if unit.service is not None:
        yield from _compose(unit, options)
    elif unit.run is not None:
        yield from _run(unit, options)


DOC = RuleDoc(
    what=f"""\
A Compose service with `ipc: service:x` (or `ipc: container:y`, `y` the `container_name` of a
service in the same file) whose donor has no `ipc:`, `ipc: private` or `ipc: none`; a
`docker run --ipc=container:x` whose donor is started earlier in the same file
(`docker run --name x`) without `--ipc=shareable` (or `host`). Docker's default IPC mode is
`private` (dockerd `--default-ipc-mode`, moby `daemon/config` `DefaultIpcMode`), and moby's
`getIPCContainer` (`daemon/container_operations_unix.go`) refuses a donor whose /dev/shm is not
shareable. Not flagged: Podman lines (Podman's default IPC mode is `shareable`), podman-compose
(`--target podman-compose`: it never reads `ipc:`), donors defined outside the file, and
placeholders. Measured with Docker Engine 20.10.24 and Compose 1.29.2.
Sources: {sources("compose", "docker-run")}.
""",
    why="""\
The joining container never starts: `docker compose up` stops with `Cannot start service x:
can't join IPC of container <id>: non-shareable IPC (hint: use IpcMode:shareable for the donor
container)` (the wording before the hint differs between Docker versions).""",
    fix="""\
Set `ipc: shareable` on the donor service (`--ipc=shareable` on the donor's `docker run`). Its
/dev/shm keeps its `shm_size`; the joining containers use it.
""",
    fix_safety="""\
Safe: `--fix` inserts `ipc: shareable` as the donor service's first key (or `--ipc=shareable`
after the donor's `run`), or rewrites an explicit `private` to `shareable`; a shareable
namespace is still private to the containers that join it. A donor with `ipc: none` has no
/dev/shm at all: the fix is shown, not applied. Donors reached through YAML anchors get the fix
shown only.""",
    applies="safe",
    bad=Example(
        "compose.yaml",
        """\
services:
  server:
    image: vllm/vllm-openai
    shm_size: "8g"
  sidecar:
    image: my/metrics
    ipc: "service:server"
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  server:
    ipc: shareable
    image: vllm/vllm-openai
    shm_size: "8g"
  sidecar:
    image: my/metrics
    ipc: "service:server"
""",
    ),
)

RULE = Rule(
    code="SHM013",
    name="ipc-donor-not-shareable",
    summary="ipc: service:x / --ipc=container:x where x is not ipc: shareable (start fails)",
    severity=Severity.ERROR,
    fix=FixAvailability.SOMETIMES,
    targets=("compose", "docker-run"),
    why=(
        "Docker's default IPC mode is private: a container that joins a donor without "
        "`ipc: shareable` fails to start with 'non-shareable IPC'."
    ),
    doc=DOC,
    check=check,
)

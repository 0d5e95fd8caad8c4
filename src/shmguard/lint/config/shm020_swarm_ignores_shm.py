"""SHM020 swarm-ignores-shm: a Compose file meant for ``docker stack deploy`` whose /dev/shm
settings Swarm ignores or rejects.

docker/cli's stack loader (``cli/compose/types/types.go`` ``UnsupportedProperties``) lists
``shm_size`` and ``ipc``: ``docker stack deploy`` prints ``Ignoring unsupported options: ipc,
shm_size`` and deploys without them (a Swarm ``ContainerSpec`` has no shm size or IPC mode). A
service's ``tmpfs:`` is parsed but never converted (``cli/compose/convert``), so it is dropped
without a word. The one /dev/shm knob Swarm has is a ``type: tmpfs`` volume, whose
``tmpfs.size`` the v3 schema (``cli/compose/schema/data/config_schema_v3.*.json``, 3.6 and
later) types as an integer of bytes: a string such as ``"8g"`` fails validation
(``services.train.volumes.0.tmpfs.size must be a integer``). Swarm was not run for this rule.

Whether a file is deployed with ``docker stack deploy`` is not written in it. The rule speaks
only where the file itself is for Swarm: a service with ``deploy.placement``,
``deploy.mode: global``, ``deploy.update_config``, ``deploy.rollback_config`` or
``deploy.endpoint_mode`` (fields only Swarm acts on), or a top-level network with
``driver: overlay``; and no service has ``container_name`` or ``build`` (stack deploy ignores
both, so a file with them is run by ``docker compose``, as the corpus's monitoring files with
a ``deploy.mode: global`` node exporter are). ``deploy.replicas`` and ``version: "3"`` alone do
not count: Compose v2 honours replicas and reads v3 files.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, edit_fix, is_dev_shm, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Edit, Fix
from shmguard.model.fix import Change, Setting
from shmguard.sources.compose import ComposeFile, Mount
from shmguard.sources.k8s_model import dig, text
from shmguard.sources.yamlnode import YMap, YNode, YScalar
from shmguard.units import SizeError, parse_docker_size

_COMPOSE_ONLY = ("container_name", "build")
_SWARM_DEPLOY = ("placement", "update_config", "rollback_config", "endpoint_mode")


def swarm_marker(cf: ComposeFile) -> str | None:
    """Why ``cf`` is a file for ``docker stack deploy`` (the first Swarm-only field found, as
    ``service 'x' has deploy.placement``), or None when nothing in it says so or a service has
    ``container_name`` or ``build`` (which stack deploy ignores: a file for ``docker
    compose``)."""
    if any(svc.node.get(k) is not None for svc in cf.services for k in _COMPOSE_ONLY):
        return None
    for svc in cf.services:
        deploy = svc.node.get("deploy")
        if not isinstance(deploy, YMap):
            continue
        for key in _SWARM_DEPLOY:
            if deploy.get(key) is not None:
                return f"service {svc.name!r} has deploy.{key}"
        if (text(deploy.get("mode")) or "").strip() == "global":
            return f"service {svc.name!r} has deploy.mode: global"
    nets = cf.root.get("networks")
    if isinstance(nets, YMap):
        for name, (_, net) in nets.entries.items():
            if (text(dig(net, "driver")) or "").strip() == "overlay":
                return f"network {name!r} has driver: overlay"
    return None


def _size(node: YNode | None) -> int | None:
    if not isinstance(node, YScalar) or node.placeholder:
        return None
    try:
        return parse_docker_size(node.value) or None
    except SizeError:
        return None


def _volume_fix(n: int | None, what: str) -> Fix:
    size = str(n) if n else "<bytes>"
    line = f"{{type: tmpfs, target: /dev/shm, tmpfs: {{size: {size}}}}}"
    return Fix(
        "Mount a tmpfs volume at /dev/shm",
        f"Add `volumes: [{line}]` to the service (the size an integer of bytes, as Swarm's "
        f"schema requires){what}.",
        (Change(Setting.SHM_SIZE, n, ("compose",)),) if n else (),
        (),
        Applicability.DISPLAY_ONLY,
    )


def _string_size(m: Mount) -> Violation | None:
    node = m.size
    if not isinstance(node, YScalar) or node.placeholder:
        return None
    if node.style == "plain" and node.value.strip().isdigit():
        return None
    n = _size(node)
    edit = Edit(node.start, node.end, str(n)) if n is not None else None
    return Violation(
        f"volume at {m.target}: tmpfs.size {node.raw} is a string: docker stack deploy rejects "
        "the file (tmpfs.size must be a integer)"
        + (f"; write {n}" if n is not None else "; write an integer of bytes"),
        node.location(),
        edit_fix(
            f"Write {n}" if n is not None else "Write an integer of bytes",
            f"Write {n} (the same bytes as an integer, which Compose reads alike)."
            if n is not None
            else "Write the size as an integer of bytes.",
            (),
            edit,
        ),
        "string-size",
    )


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag /dev/shm settings Swarm ignores in a file that is for Swarm."""
    svc = unit.service
    if svc is None:
        return
    why = swarm_marker(svc.file)
    if why is None:
        return
    mounts = svc.mounts
    # a long-syntax volume is a mapping; a service tmpfs: entry is a string
    volumes = [m for m in mounts if m.kind == "tmpfs" and isinstance(m.node, YMap)]
    for m in volumes:
        if (v := _string_size(m)) is not None:
            yield v
    has_swarm_shm = any(is_dev_shm(m.target) for m in volumes)
    if has_swarm_shm:
        return  # shm_size / ipc then only serve docker compose; Swarm has its tmpfs volume
    ctx = f"the file is for docker stack deploy ({why})"
    shm = svc.shm_size
    n = _size(shm)
    if isinstance(shm, YScalar):
        yield Violation(
            f"shm_size: {shm.raw}: {ctx}, which ignores shm_size (Ignoring unsupported options): "
            "the tasks get a 64 MiB /dev/shm",
            shm.location(),
            _volume_fix(n, " (keep shm_size for docker compose if the file serves both)"),
        )
    ipc = svc.ipc
    if isinstance(ipc, YScalar) and not ipc.placeholder:
        yield Violation(
            f"ipc: {ipc.raw}: {ctx}, which ignores ipc: the tasks get a private IPC namespace "
            "and a 64 MiB /dev/shm",
            ipc.location(),
            _volume_fix(n, ""),
        )
    for m in mounts:
        if m.kind == "tmpfs" and isinstance(m.node, YScalar) and is_dev_shm(m.target):
            opts = dict(o.partition("=")[::2] for o in (m.options or "").split(",") if o)
            size = opts.get("size")
            yield Violation(
                f"tmpfs: {m.target}: {ctx}, which drops a service's tmpfs: without a warning",
                m.node.location(),
                _volume_fix(_kernel_size(size), ""),
            )


def _kernel_size(size: str | None) -> int | None:
    from shmguard.units import parse_tmpfs_size

    if not size:
        return None
    try:
        return parse_tmpfs_size(size) or None
    except SizeError:
        return None


DOC = RuleDoc(
    what=f"""\
A Compose file meant for `docker stack deploy` whose /dev/shm settings Swarm ignores or
rejects: a service's `shm_size` or `ipc` (docker/cli's stack loader lists both as unsupported:
`Ignoring unsupported options: ipc, shm_size`), a service `tmpfs:` entry at /dev/shm (parsed
but never converted, dropped without a warning), and a `type: tmpfs` volume whose `tmpfs.size`
is a string (the v3 schema, 3.6 and later, wants an integer of bytes). The file is taken to be
for Swarm only when it says so: a service with `deploy.placement`, `deploy.mode: global`,
`deploy.update_config`, `deploy.rollback_config` or `deploy.endpoint_mode`, or a network with
`driver: overlay`, and no service has `container_name` or `build` (which stack deploy ignores:
such a file is run with `docker compose`); `deploy.replicas` or `version: "3"` alone are not
enough (Compose v2 honours them too). A service that already has a tmpfs volume at /dev/shm
is not flagged for `shm_size`, `ipc` or `tmpfs:` (they then serve `docker compose` only).
Behaviour read from docker/cli (`cli/compose/types/types.go`, `cli/compose/convert/volume.go`,
`cli/compose/schema`); Swarm was not run for this rule. Sources: {sources("compose")}.
""",
    why="""\
`docker stack deploy` starts the tasks with Docker's 64 MiB /dev/shm whatever `shm_size` says;
the only warning is one line at deploy time, and a `tmpfs:` entry is dropped silently. PyTorch
DataLoader workers then fail with `Bus error` or `No space left on device`. A string
`tmpfs.size` stops the deploy with `tmpfs.size must be a integer`.""",
    fix="""\
Mount a tmpfs volume at /dev/shm with the size as an integer of bytes
(`{type: tmpfs, target: /dev/shm, tmpfs: {size: 8589934592}}`; `shm_size: 8g` gives the size);
write a string `tmpfs.size` as that integer (`"8g"` -> `8589934592`).
""",
    fix_safety="""\
Safe for a string `tmpfs.size` that go-units reads: the integer is the same bytes, which Compose
reads alike. Display-only for the rest: adding a volume changes the service's mounts, and
whether the file also serves `docker compose` (where `shm_size` works) is the author's to say.
A string size is an error (the deploy fails); the others are warnings.""",
    applies="safe (string size) / display-only",
    variant_words={"string-size": "for a string `tmpfs.size`"},
    bad=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch
    shm_size: 8g
    deploy:
      placement: {constraints: [node.labels.gpu == true]}
""",
    ),
    good=Example(
        "compose.yaml",
        """\
services:
  train:
    image: pytorch/pytorch
    volumes:
      - {type: tmpfs, target: /dev/shm, tmpfs: {size: 8589934592}}
    deploy:
      placement: {constraints: [node.labels.gpu == true]}
""",
    ),
)

RULE = Rule(
    code="SHM020",
    name="swarm-ignores-shm",
    summary="A Compose file for docker stack deploy: shm_size, ipc and tmpfs: ignored by Swarm",
    severity=Severity.WARNING,
    fix=FixAvailability.SOMETIMES,
    targets=("compose",),
    why=(
        "docker stack deploy ignores shm_size, ipc and a service's tmpfs:, so the tasks get the "
        "64 MiB /dev/shm; only a tmpfs volume with an integer size reaches Swarm."
    ),
    doc=DOC,
    check=check,
    variants={"string-size": Severity.ERROR},
)

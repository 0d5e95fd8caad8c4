"""SHM024 ipc-sysctl-for-shm: IPC sysctls (``kernel.shmmax``, ``kernel.shmall``, ...) set to
"get more shared memory": they do not size /dev/shm, and Kubernetes refuses most of them.

/dev/shm is a tmpfs whose size is a mount option (the runtime's ``--shm-size``, or the emptyDir's
``sizeLimit``); ``kernel.shm*``, ``kernel.msg*``, ``kernel.sem`` and ``fs.mqueue.*`` are the
System V / POSIX message queue limits of the IPC namespace (kernel
``Documentation/admin-guide/sysctl/kernel.rst``). Kubernetes (docs "Using sysctls in a
Kubernetes Cluster") calls them namespaced but, except ``kernel.shm_rmid_forced``, not in the
safe set: the kubelet rejects the pod (``SysctlForbidden``) unless ``--allowed-unsafe-sysctls``
lists them, and with ``hostIPC: true`` it refuses every IPC sysctl (kubelet
``pkg/kubelet/sysctl`` allowlist: ``not allowed with host ipc enabled``). Docker and Podman set
namespaced IPC sysctls (``--sysctl``, Compose ``sysctls:``): there the finding is info, they
size nothing; with ``--ipc=host`` both refuse IPC sysctls (Docker ``docker run --sysctl`` and
Podman ``podman-run(1)`` ``--sysctl`` docs), an error.
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, flag_loc, ipc_mode, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix, Location
from shmguard.sources.k8s_model import text
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq

#: The Kubernetes safe sysctls of the IPC namespace (Kubernetes docs, "Using sysctls in a
#: Kubernetes Cluster", safe set).
_SAFE = frozenset({"kernel.shm_rmid_forced"})
#: Sysctls that only size /dev/shm in people's minds (Docker: info).
_SHM = ("kernel.shmmax", "kernel.shmall", "kernel.shmmni")


def is_ipc_sysctl(name: str) -> bool:
    """True for a sysctl of the IPC namespace: ``kernel.shm*``, ``kernel.msg*``,
    ``kernel.sem``, ``fs.mqueue.*`` (Kubernetes docs, namespaced sysctls)."""
    n = name.strip().replace("/", ".")
    return n.startswith(("kernel.shm", "kernel.msg", "fs.mqueue.")) or n == "kernel.sem"


def _fix(kubernetes: bool) -> Fix:
    where = (
        "a memory-backed emptyDir at /dev/shm with a sizeLimit"
        if kubernetes
        else "shm_size / --shm-size"
    )
    return Fix(
        "Remove the IPC sysctl; size /dev/shm instead",
        f"Remove it (it limits System V IPC, not /dev/shm) and size /dev/shm with {where}. Keep "
        "it only if the job uses System V shared memory and the nodes allow it.",
    )


def _pod(unit: Unit) -> Iterator[Violation]:
    pod = unit.pod
    assert pod is not None
    host_ipc = text(pod.host_ipc) in ("true", "True", "yes", "on")
    for entry in pod.sysctls:
        node = entry.get("name")
        if not isinstance(node, YScalar) or node.placeholder or not is_ipc_sysctl(node.value):
            continue
        name = node.value.strip()
        if host_ipc:
            msg = (
                f"sysctl {name} with hostIPC: true: the kubelet refuses every IPC sysctl in the "
                "host's IPC namespace, so the pod does not start"
            )
        elif name in _SAFE:
            continue
        else:
            msg = (
                f"sysctl {name} is not in Kubernetes' safe set: the pod fails with "
                "SysctlForbidden unless the kubelet's --allowed-unsafe-sysctls lists it, and it "
                "does not size /dev/shm (a System V IPC limit)"
            )
        yield Violation(msg, node.location(), _fix(True))


def _names(node: YNode | None) -> Iterator[tuple[str, Location]]:
    """The sysctl names of a Compose ``sysctls:`` (mapping, or list of ``name=value``)."""
    if isinstance(node, YMap):
        for key, (knode, _) in node.entries.items():
            yield key, knode.location()
    elif isinstance(node, YSeq):
        for item in node:
            if isinstance(item, YScalar) and not item.placeholder:
                yield item.value.partition("=")[0], item.location()


def _docker_msg(name: str, how: str) -> str:
    return (
        f"{how} {name} does not size /dev/shm: it is a System V IPC limit (/dev/shm is a tmpfs "
        "sized by shm_size / --shm-size)"
    )


def _docker(name: str, where: str, loc: Location, host: bool) -> Iterator[Violation]:
    """A Compose or run line sysctl: with host IPC any IPC sysctl is refused (error), else the
    shm ones are info."""
    if host and is_ipc_sysctl(name):
        msg = (
            f"{where} {name} with host IPC: Docker and Podman refuse IPC sysctls in the host's "
            "IPC namespace, so the container does not start"
        )
        yield Violation(msg, loc, _fix(False))
    elif name in _SHM:
        yield Violation(_docker_msg(name, where), loc, _fix(False), "compose-or-run")


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag IPC sysctls: refused ones (Kubernetes unsafe ones, any with host IPC) as errors,
    the shm ones in Compose and run lines as info."""
    if unit.pod is not None:
        yield from _pod(unit)
    elif unit.service is not None:
        # podman-compose never reads ipc: (runtime_truth.md F)
        host = (
            ipc_mode(text(unit.service.ipc)) == "host"
            and options.target.compose != "podman-compose"
        )
        for name, loc in _names(unit.service.sysctls):
            yield from _docker(name.strip(), "sysctl", loc, host)
    elif unit.run is not None:
        ipc = unit.run.last("--ipc")
        host = ipc is not None and ipc_mode(ipc.value) == "host"
        for f in unit.run.get("--sysctl"):
            name = (f.value or "").partition("=")[0].strip()
            yield from _docker(name, "--sysctl", flag_loc(unit, f), host)


DOC = RuleDoc(
    what=f"""\
An IPC sysctl in a Kubernetes pod's `securityContext.sysctls`: `kernel.shm*` (but
`kernel.shm_rmid_forced`, which is in the safe set), `kernel.msg*`, `kernel.sem`,
`fs.mqueue.*` (error); and any of them, `kernel.shm_rmid_forced` included, in a pod with
`hostIPC: true` (error). In Compose `sysctls:` and `docker|podman run --sysctl`,
`kernel.shmmax`, `kernel.shmall` and `kernel.shmmni` get an **info** finding (variant
`compose-or-run`): Docker and Podman set these namespaced sysctls, they just do not size
/dev/shm; with `ipc: host` / `--ipc=host` any IPC sysctl is an error (Docker's `docker run
--sysctl` and Podman's `podman-run(1)` `--sysctl` docs: not allowed with host IPC; not flagged
under `--target compose=podman-compose`, which ignores `ipc:`). Kubernetes docs, "Using
sysctls in a Kubernetes Cluster" (safe and namespaced sysctls, `--allowed-unsafe-sysctls`,
`SysctlForbidden`); kubelet `pkg/kubelet/sysctl` (IPC sysctls refused with host IPC); kernel
`Documentation/admin-guide/sysctl/kernel.rst` (shmmax, shmall, shmmni: System V shared
memory). Sources: {sources("compose", "kubernetes", "docker-run", "podman-run")}.
""",
    why="""\
/dev/shm is a tmpfs: its size is a mount option (`--shm-size`, `shm_size`, an emptyDir's
`sizeLimit`), and `kernel.shmmax` or `kernel.shmall` do not change it, so the job still has
64 MiB. In Kubernetes it is worse: these sysctls are not in the safe set, and the kubelet
rejects the pod (`SysctlForbidden`) unless the node allows them; with `hostIPC: true` no IPC
sysctl is accepted at all.""",
    fix="""\
Remove the sysctl and size /dev/shm: a memory-backed emptyDir at /dev/shm with a `sizeLimit`
(Kubernetes), `shm_size` (Compose), `--shm-size` (docker/podman). Keep it only when the job uses
System V shared memory and the nodes list it in `--allowed-unsafe-sysctls`.
""",
    fix_safety="""\
Display-only: whether the job uses System V IPC limits cannot be told from the file.""",
    applies="display-only",
    variant_words={"compose-or-run": "for kernel.shm* in Compose and run lines without host IPC"},
    bad=Example(
        "pod.yaml",
        """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  securityContext:
    sysctls:
      - {name: kernel.shmmax, value: "68719476736"}
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
      command: [torchrun, --nproc-per-node=4, train.py]
""",
    ),
    good=Example(
        "pod.yaml",
        """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  containers:
    - name: train
      image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
      command: [torchrun, --nproc-per-node=4, train.py]
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 8Gi}
""",
    ),
)

RULE = Rule(
    code="SHM024",
    name="ipc-sysctl-for-shm",
    summary="IPC sysctls (kernel.shmmax, ...) that do not size /dev/shm (unsafe in Kubernetes)",
    severity=Severity.ERROR,
    fix=FixAvailability.ALWAYS,
    targets=("compose", "kubernetes", "docker-run", "podman-run"),
    why=(
        "kernel.shm*/msg*/sem and fs.mqueue.* are System V IPC limits, not the size of /dev/shm; "
        "Kubernetes rejects the pod (SysctlForbidden) unless the kubelet allows them."
    ),
    doc=DOC,
    check=check,
    variants={"compose-or-run": Severity.INFO},
)

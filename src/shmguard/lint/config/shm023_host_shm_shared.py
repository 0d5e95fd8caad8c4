"""SHM023 host-shm-shared: the host's /dev/shm given to a container to get a big one:
``hostIPC: true``, a ``hostPath`` of /dev/shm, or a bind of the host's /dev/shm.

``hostIPC`` joins the host IPC namespace and (containerd, CRI-O) the host /dev/shm; Pod Security
Standards Baseline forbids it and every ``hostPath`` volume (website
``concepts/security/pod-security-standards.md``; config_formats.md 4.4). Files written there
outlive the container and are charged to its memory cgroup (runtime_truth.md H: a 265,994,240 B
file stayed in the host's /dev/shm after the container was OOM-killed).
"""

from __future__ import annotations

from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, flag_loc, is_dev_shm, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix
from shmguard.sources.workload import strong
from shmguard.sources.yamlnode import YScalar

_K8S_FIX = Fix(
    "Mount a memory-backed emptyDir at /dev/shm instead",
    "Drop hostIPC / the hostPath and mount `emptyDir: {medium: Memory, sizeLimit: 1Gi}` at "
    "/dev/shm (size it with `shmguard measure`).",
)
_DOCKER_FIX = Fix(
    "Give the container its own sized /dev/shm",
    "Drop the bind of /dev/shm and set `shm_size` (Compose) / `--shm-size` (docker run).",
)


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag host /dev/shm sharing."""
    pod = unit.pod
    if pod is not None:
        ml = any(strong(w) for _, w in unit.containers)
        # an agent or device plugin (monitoring, GPU sharing) needs the host's IPC by design
        if isinstance(pod.host_ipc, YScalar) and pod.host_ipc.yaml11() is True and ml:
            yield Violation(
                "hostIPC: true shares the host's IPC namespace and /dev/shm with this pod",
                pod.host_ipc.location(),
                _K8S_FIX,
            )
        for v in pod.volumes:
            if isinstance(v.host_path, YScalar) and is_dev_shm(v.host_path.value):
                yield Violation(
                    f"volume {v.name!r} is the host's /dev/shm (hostPath)",
                    v.host_path.location(),
                    _K8S_FIX,
                )
    elif unit.service is not None:
        for m in unit.service.mounts:
            if m.kind == "bind" and is_dev_shm(m.source):
                yield Violation(
                    f"the host's /dev/shm is bind-mounted at {m.target}",
                    m.node.location(),
                    _DOCKER_FIX,
                )
    elif unit.run is not None:
        for f in unit.run.flags.named("--volume"):
            spec = f.value or ""
            if is_dev_shm(spec.split(":")[0]) and ":" in spec:
                yield Violation(
                    f"the host's /dev/shm is bind-mounted ({f.spelled} {spec})",
                    flag_loc(unit, f),
                    _DOCKER_FIX,
                )


DOC = RuleDoc(
    what=f"""\
`hostIPC: true` on a pod that runs an ML workload (agents and device plugins need the host's
IPC by design and are left alone), a `hostPath` volume whose path is /dev/shm, or a Compose /
`docker run` bind of the host's /dev/shm (`/dev/shm:/dev/shm`). `--ipc=host` is not flagged
here (it is the documented way for some multi-process servers); SHM011 flags it when it hides
a size. Sources: {sources("compose", "kubernetes", "docker-run", "podman-run")}.
""",
    why="""\
The host's /dev/shm is unbounded by the pod (half of the node's RAM by default), shared with
the host and every other such container: files written there outlive the container, and one job
can fill it for all. Pod Security Standards Baseline forbids `hostIPC` and `hostPath`.""",
    fix="""\
Give the pod its own /dev/shm: `emptyDir: {medium: Memory, sizeLimit: 1Gi}` mounted at /dev/shm
(Compose / docker: `shm_size` / `--shm-size`).
""",
    fix_safety="""\
Display-only: removing host sharing can break a job that relies on it (several containers
meeting in one /dev/shm), so `--fix` does not do it.""",
    applies="display-only",
    bad=Example(
        "pod.yaml",
        """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  hostIPC: true
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
    code="SHM023",
    name="host-shm-shared",
    summary="hostIPC: true, or the host's /dev/shm mounted in (hostPath, bind)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("compose", "kubernetes", "docker-run", "podman-run"),
    why=(
        "The host's /dev/shm is shared with every such container and the host: files outlive "
        "the container, one job can fill it for all, and Pod Security Baseline forbids it."
    ),
    doc=DOC,
    check=check,
)

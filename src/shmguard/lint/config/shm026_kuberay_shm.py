"""SHM026 kuberay-shm: a KubeRay Ray container with its own /dev/shm emptyDir that adds nothing
to the one KubeRay injects, or ``plasma-directory`` in ``rayStartParams`` with no /dev/shm.

KubeRay (``ray-operator/controllers/ray/common/pod.go``, ``BuildPod`` -> ``addEmptyDir``; read
at the current master, the same logic since KubeRay 0.x) mounts a volume ``shared-mem``,
``emptyDir{medium: Memory, sizeLimit: <the Ray container's limits.memory, else
requests.memory>}``, at /dev/shm in the Ray container (``RayContainerIndex = 0``, the first
container of the head and worker group templates), unless that container already mounts
/dev/shm (``checkIfVolumeMounted``). The current source also skips the injection when
``rayStartParams`` has ``plasma-directory`` ("skip /dev/shm volumeMount injection due to
explicit plasma-directory"); older releases inject regardless.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, is_dev_shm, quantity_bytes, sources
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Applicability, Fix
from shmguard.sources.k8s import PodSpec
from shmguard.sources.k8s_model import text
from shmguard.sources.yamlnode import YMap, YNode, YSeq

_RAY_KINDS = ("RayCluster", "RayJob", "RayService")
_TEMPLATE = ".template.spec"
_STEP = re.compile(r"\.?([A-Za-z0-9_-]+)|\[(\d+)\]")


def _group(pod: PodSpec) -> YMap | None:
    """The head or worker group mapping (``headGroupSpec``, ``workerGroupSpecs[i]``) whose
    template is ``pod``, or None (a RayJob's submitter pod, or a path it cannot follow)."""
    base = pod.obj.node.path
    path = pod.path
    if not path.endswith(_TEMPLATE) or "submitterPodTemplate" in path:
        return None
    rest = path[len(base) : -len(_TEMPLATE)] if path.startswith(base) else None
    if rest is None:
        return None
    node: YNode | None = pod.obj.node
    pos = 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None or node is None:
            return None
        pos = m.end()
        if m.group(1) is not None:
            node = node.get(m.group(1)) if isinstance(node, YMap) else None
        else:
            i = int(m.group(2))
            node = node.items[i] if isinstance(node, YSeq) and i < len(node.items) else None
    return node if isinstance(node, YMap) else None


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a redundant /dev/shm emptyDir on the Ray container, and plasma-directory without
    /dev/shm."""
    pod = unit.pod
    if pod is None or not pod.containers or pod.obj.kind not in _RAY_KINDS:
        return
    if "kuberay" not in pod.notes:  # the ray.io API group, not a look-alike kind
        return
    group = _group(pod)
    if group is None:
        return
    ray = pod.containers[0]  # KubeRay's RayContainerIndex
    label = f"Ray container {ray.name!r}" if ray.name else "the Ray container"
    shm_mounts = [m for m in ray.volume_mounts if is_dev_shm(text(m.mount_path))]
    params = group.get("rayStartParams")
    plasma = params.entries.get("plasma-directory") if isinstance(params, YMap) else None
    if plasma is not None and not shm_mounts:
        key, value = plasma
        yield Violation(
            f"rayStartParams plasma-directory: {text(value)!r} makes KubeRay skip its /dev/shm "
            f"volume, and {label} mounts none: /dev/shm stays 64 MiB",
            key.location(),
            Fix(
                "Mount a memory emptyDir at /dev/shm",
                "Add a volume `dshm` (`emptyDir: {medium: Memory, sizeLimit: ...}`) and mount it "
                f"at /dev/shm in {label}, or drop plasma-directory so KubeRay adds one.",
                (),
                (),
                Applicability.DISPLAY_ONLY,
            ),
        )
    if not shm_mounts:
        return
    mount = shm_mounts[0]
    vols = {v.name: v for v in pod.volumes}
    vol = vols.get(mount.name)
    if vol is None or vol.empty_dir is None or text(vol.medium) != "Memory":
        return
    limit = quantity_bytes(ray.memory_limit) or quantity_bytes(ray.memory_request)
    size = quantity_bytes(vol.size_limit)
    if vol.size_limit is not None and (size is None or limit is None or size != limit):
        return  # a size of its own: the author's choice, not a duplicate
    if vol.size_limit is None and limit is not None:
        detail = (
            "without a sizeLimit, where KubeRay's would be bounded by the container's memory "
            f"({text(ray.memory_limit) or text(ray.memory_request)})"
        )
    else:
        detail = "the same as KubeRay's (a memory emptyDir sized to the container's memory)"
    where = mount.mount_path if mount.mount_path is not None else mount.node
    yield Violation(
        f"{label} mounts its own /dev/shm emptyDir {mount.name!r}, {detail}: KubeRay injects "
        "'shared-mem' there by itself",
        where.location(),
        Fix(
            f"Remove volume {mount.name!r} and its /dev/shm mount",
            "Remove the volume and its /dev/shm mount from the Ray container; KubeRay then "
            "mounts 'shared-mem' sized to the container's memory limit (or keep yours and give "
            "it the sizeLimit you want).",
            (),
            (),
            Applicability.DISPLAY_ONLY,
        ),
    )


DOC = RuleDoc(
    what=f"""\
In a KubeRay RayCluster, RayJob or RayService head or worker group: the Ray container (the
first container of the template) mounts its own memory-backed emptyDir at /dev/shm with no
`sizeLimit`, or with a `sizeLimit` equal to the container's memory limit (request when no
limit); or the group's `rayStartParams` has `plasma-directory` and the Ray container mounts
nothing at /dev/shm. A /dev/shm emptyDir with a size of its own is the author's choice and not
flagged. Info only. KubeRay's behaviour is read from its source,
`ray-operator/controllers/ray/common/pod.go` (`addEmptyDir`, volume `shared-mem`,
`makeEmptyDirVolume`: `sizeLimit` from `limits.memory`, else `requests.memory`; the
`plasma-directory` skip is in the current source, not in older releases); KubeRay was not run
for this rule. Sources: {sources("kubernetes")}.
""",
    why="""\
KubeRay mounts `shared-mem` (medium Memory, bounded by the container's memory) at /dev/shm by
itself unless the container already mounts /dev/shm. A copied-in `dshm` without `sizeLimit`
replaces that bounded volume with an unbounded one; one with the same size is noise that hides
which volume is in effect. With `plasma-directory` set, KubeRay skips its volume, so /dev/shm is
the runtime's 64 MiB, too small for PyTorch DataLoader workers in the same container.""",
    fix="""\
Remove the volume and its /dev/shm mount and let KubeRay add `shared-mem`, or give yours the
`sizeLimit` you want. With `plasma-directory`, mount a memory emptyDir at /dev/shm yourself.
""",
    fix_safety="""\
Display-only: whether the own volume or the plasma directory is deliberate is the author's
call, and removing list items from a template is left to them.""",
    applies="display-only",
    bad=Example(
        "raycluster.yaml",
        """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: train
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.9.0
            resources: {limits: {memory: 32Gi}}
            volumeMounts: [{name: dshm, mountPath: /dev/shm}]
        volumes:
          - name: dshm
            emptyDir: {medium: Memory}
""",
    ),
    good=Example(
        "raycluster.yaml",
        """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: train
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.9.0
            resources: {limits: {memory: 32Gi}}
""",
    ),
)

RULE = Rule(
    code="SHM026",
    name="kuberay-shm",
    summary="A KubeRay Ray container's own dshm duplicating KubeRay's, or plasma-directory set",
    severity=Severity.INFO,
    fix=FixAvailability.ALWAYS,
    targets=("kubernetes",),
    why=(
        "KubeRay already mounts a memory emptyDir sized to the Ray container's memory limit at "
        "/dev/shm; an own one adds nothing (or drops the bound), and plasma-directory makes "
        "KubeRay skip it, leaving 64 MiB."
    ),
    doc=DOC,
    check=check,
)

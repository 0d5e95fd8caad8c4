"""The SHM rules that apply to a pod, written once in CEL and once in Rego.

Each :class:`PodRule` is one of ``check``'s rules (its code and name come from
:data:`shmguard.lint.config.RULES`) restated over a Pod object as a policy engine sees it at
admission: CEL for the ValidatingAdmissionPolicy and Kyverno (``object`` is the Pod), Rego for
Gatekeeper (``input.review.object``). Workload detection uses the linter's own token lists,
compiled to regular expressions (:data:`~shmguard.sources.tokenmatch.IMAGE_PATTERN`,
``COMMAND_PATTERN``: RE2 syntax, over the ASCII-lower-cased image and command line, true
exactly where ``check``'s token matcher finds a token), the
:data:`~shmguard.sources.workload.ENV_PREFIXES` and the ``shmguard.io/workload``
annotation; a GPU request alone is not a PyTorch workload here either
(:func:`~shmguard.sources.workload.strong`).

What the engines cannot do as ``check`` does:

* detection is by token over the image, the joined command and args, and the environment
  variable names: heuristic, as in ``check``, and blind to what the image's own entrypoint
  runs; CEL lowers the text with ``lowerAscii()`` as ``check`` does, Rego with ``lower()``
  (Unicode rules: the answer could differ only for non-ASCII capitals that lower to ASCII
  letters, such as the Kelvin sign, which no valid image reference holds);
* SHM009 compares quantities with the Kubernetes CEL quantity library (``quantity()``,
  ``compareTo``), in Kubernetes 1.29 and later (kubernetes.io/docs/reference/using-api/cel,
  "Kubernetes quantity library"); Rego uses OPA's ``units.parse_bytes``
  (openpolicyagent.org/docs/latest/policy-reference/#units), which reads ``m`` as mega, so
  both skip milli quantities (SHM004 reports them);
* pods only, as the API server holds them after every mutating webhook: a KubeRay pod
  already has the ``shared-mem`` volume the operator adds (``check`` skips ray.io objects for
  that reason), while MPIJob launchers, which ``check`` leaves alone, cannot be told from
  their pods and are checked like any pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.estimate.decide import ShmEvidence, choose_shm
from shmguard.estimate.policy import Policy
from shmguard.sources.tokenmatch import COMMAND_PATTERN, IMAGE_PATTERN
from shmguard.sources.workload import ENV_PREFIXES
from shmguard.units import format_k8s_quantity

SHM_PATHS = ("/dev/shm", "/dev/shm/")


def policy_shm_size(policy: Policy | None = None) -> str:
    """The /dev/shm size (a quantity, ``1Gi``) the generated policies write (Kyverno's mutate)
    and suggest (every engine's messages): the one size decision
    (:func:`~shmguard.estimate.decide.choose_shm`) on no evidence and no memory limit, the
    sizing policy's default. A policy engine's mutation writes one static value, so it cannot
    cap it by a container's memory limit as ``check --fix`` and the webhook do."""
    return format_k8s_quantity(choose_shm(ShmEvidence(), policy).bytes)


_DEFAULT_SIZE = policy_shm_size()
_SHM = "['/dev/shm', '/dev/shm/']"
_ENV_RE = "^(?:" + "|".join(ENV_PREFIXES) + ")"


def _mounts_shm(c: str) -> str:
    return f"(has({c}.volumeMounts) && {c}.volumeMounts.exists(m, m.mountPath in {_SHM}))"


def _mounts(c: str, v: str, *, at_shm: bool = False) -> str:
    where = f" && m.mountPath in {_SHM}" if at_shm else ""
    return f"(has({c}.volumeMounts) && {c}.volumeMounts.exists(m, m.name == {v}.name{where}))"


def _limit(c: str) -> str:
    return f"(has({c}.resources) && has({c}.resources.limits) && 'memory' in {c}.resources.limits)"


def _cmd(c: str) -> str:
    return (
        f"((has({c}.command) ? {c}.command.join(' ') : '') + ' ' + "
        f"(has({c}.args) ? {c}.args.join(' ') : ''))"
    )


_ML = (
    f"(has(c.image) && c.image.lowerAscii().matches(r'{IMAGE_PATTERN}')) || "
    f"{_cmd('c')}.lowerAscii().matches(r'{COMMAND_PATTERN}') || "
    f"(has(c.env) && c.env.exists(e, e.name.matches(r'{_ENV_RE}')))"
)

#: CEL variables (name, expression), in order: later ones use earlier ones.
CEL_VARIABLES: tuple[tuple[str, str], ...] = (
    ("hostIPC", "has(object.spec.hostIPC) && object.spec.hostIPC == true"),
    ("volumes", "has(object.spec.volumes) ? object.spec.volumes : []"),
    (
        "stated",
        "has(object.metadata.annotations) && 'shmguard.io/workload' in "
        "object.metadata.annotations ? object.metadata.annotations['shmguard.io/workload'] : ''",
    ),
    (
        "ml",
        "variables.stated == 'ml' ? object.spec.containers : "
        f"(variables.stated == 'container' ? [] : object.spec.containers.filter(c, {_ML}))",
    ),
    ("bare", f"variables.ml.filter(c, !{_mounts_shm('c')})"),
    (
        "memory",
        "variables.volumes.filter(v, has(v.emptyDir) && has(v.emptyDir.medium) && "
        "v.emptyDir.medium == 'Memory')",
    ),
    (
        "dshm",
        "variables.memory.filter(v, object.spec.containers.exists(c, "
        f"{_mounts('c', 'v', at_shm=True)}))",
    ),
    (
        "spare",
        f"variables.memory.filter(v, !object.spec.containers.exists(c, {_mounts('c', 'v')}))",
    ),
)

_MILLI = "string({}).endsWith('m')"


def _no_milli(q: str, parent: str, key: str) -> str:
    return f"(!has({parent}) || !('{key}' in {parent}) || !{_MILLI.format(q)})"


@dataclass(frozen=True)
class PodRule:
    """One SHM rule over a Pod.

    Attributes:
        code: the rule's code in ``check`` (``SHM001``).
        cel: a CEL expression over ``object`` and ``variables`` (:data:`CEL_VARIABLES`),
            true when the pod passes.
        message: a CEL string expression for the failure message (``messageExpression``).
        rego: the body of a Rego ``violation`` rule that binds ``msg`` (helpers in
            :data:`REGO_HELPERS`).
        note: what the engines cannot do for this rule, or "".
    """

    code: str
    cel: str
    message: str
    rego: str
    note: str = ""


def _names(var: str) -> str:
    return f"variables.{var}.map(x, x.name).join(', ')"


RULES: tuple[PodRule, ...] = (
    PodRule(
        "SHM001",
        "variables.hostIPC || variables.bare.size() == 0 || "
        "variables.dshm.size() + variables.spare.size() > 0",
        f"'container(s) ' + {_names('bare')} + ' run PyTorch, NCCL or an inference server "
        "(image, command or NCCL_/TORCH_ environment) with no volume at /dev/shm: they get the "
        "runtime\\'s 64 MiB. Mount an emptyDir {medium: Memory, sizeLimit: SIZE} at /dev/shm.'",
        """not host_ipc
    c := ml_containers[_]
    not mounts_shm(c)
    count(dshm) + count(spare) == 0
    msg := sprintf("SHM001 ml-workload-without-shm-size: container %v runs PyTorch, NCCL or an inference server with no volume at /dev/shm: it gets the runtime's 64 MiB. Mount an emptyDir {medium: Memory, sizeLimit: %v} at /dev/shm.", [c.name, shm_size])""",  # noqa: E501
        "detection by image and command tokens and environment prefixes is heuristic",
    ),
    PodRule(
        "SHM006",
        "variables.volumes.all(v, !has(v.emptyDir) || !has(v.emptyDir.medium) || "
        "v.emptyDir.medium in ['', 'Memory', 'HugePages'] || "
        "v.emptyDir.medium.startsWith('HugePages-'))",
        '\'an emptyDir medium other than "", Memory or HugePages: the kubelet fails the '
        "volume (unknown storage medium) and the pod never starts; write medium: Memory'",
        """v := volumes[_]
    medium := v.emptyDir.medium
    not medium_ok(medium)
    msg := sprintf("SHM006 emptydir-medium-not-memory: volume %v has emptyDir medium %v: the kubelet fails the volume and the pod never starts; write medium: Memory", [v.name, medium])""",  # noqa: E501
    ),
    PodRule(
        "SHM007",
        "variables.hostIPC || variables.bare.size() == 0 || "
        "variables.dshm.size() + variables.spare.size() == 0",
        f"'container(s) ' + {_names('bare')} + ' run PyTorch, NCCL or an inference server "
        "but do not mount the pod\\'s memory emptyDir at /dev/shm: they get the runtime\\'s "
        "64 MiB.'",
        """not host_ipc
    c := ml_containers[_]
    not mounts_shm(c)
    count(dshm) + count(spare) > 0
    msg := sprintf("SHM007 dshm-not-mounted: container %v runs PyTorch, NCCL or an inference server but does not mount the pod's memory emptyDir at /dev/shm: it gets the runtime's 64 MiB.", [c.name])""",  # noqa: E501
    ),
    PodRule(
        "SHM004",
        "variables.volumes.all(v, !has(v.emptyDir) || "
        f"{_no_milli('v.emptyDir.sizeLimit', 'v.emptyDir', 'sizeLimit')}) && "
        "object.spec.containers.all(c, !has(c.resources) || ("
        f"{_no_milli('c.resources.limits.memory', 'c.resources.limits', 'memory')} && "
        f"{_no_milli('c.resources.requests.memory', 'c.resources.requests', 'memory')}))",
        "'a memory quantity in milli (64m = 0.064 bytes) where Mi was meant: write 64Mi'",
        """q := memory_quantities[_]
    endswith(q.value, "m")
    msg := sprintf("SHM004 milli-memory-quantity: %v is %v, milli (64m = 0.064 bytes); write Mi", [q.where, q.value])""",  # noqa: E501
    ),
    PodRule(
        "SHM008",
        "variables.dshm.all(v, has(v.emptyDir.sizeLimit) || "
        f"object.spec.containers.exists(c, {_mounts('c', 'v')} && {_limit('c')}))",
        "'a memory emptyDir at /dev/shm with neither sizeLimit nor a memory limit in the "
        "containers that mount it: the tmpfs can grow to the node\\'s memory; add sizeLimit'",
        """v := dshm[_]
    not v.emptyDir.sizeLimit
    not limited(v)
    msg := sprintf("SHM008 unbounded-memory-emptydir: volume %v at /dev/shm has no sizeLimit and no container mounting it has a memory limit; add sizeLimit: %v", [v.name, shm_size])""",  # noqa: E501
    ),
    PodRule(
        "SHM009",
        "variables.dshm.all(v, !has(v.emptyDir.sizeLimit) || "
        f"{_MILLI.format('v.emptyDir.sizeLimit')} || object.spec.containers.all(c, "
        f"!{_mounts('c', 'v')} || !{_limit('c')} || "
        f"{_MILLI.format('c.resources.limits.memory')} || "
        "quantity(string(c.resources.limits.memory)).compareTo("
        "quantity(string(v.emptyDir.sizeLimit))) >= 0))",
        "'a /dev/shm emptyDir sizeLimit above the memory limit of a container that mounts it: "
        "the container is OOM-killed before /dev/shm is full'",
        """v := dshm[_]
    limit := v.emptyDir.sizeLimit
    c := input.review.object.spec.containers[_]
    mounts(c, v)
    mem := c.resources.limits.memory
    not endswith(sprintf("%v", [limit]), "m")
    not endswith(sprintf("%v", [mem]), "m")
    units.parse_bytes(sprintf("%v", [limit])) > units.parse_bytes(sprintf("%v", [mem]))
    msg := sprintf("SHM009 size-limit-above-memory-limit: volume %v's sizeLimit %v is above container %v's memory limit %v: it is OOM-killed before /dev/shm is full", [v.name, limit, c.name, mem])""",  # noqa: E501
        "CEL: the quantity library needs Kubernetes 1.29+; milli quantities are left to SHM004",
    ),
    PodRule(
        "SHM023",
        "(!variables.hostIPC || variables.ml.size() == 0) && variables.volumes.all(v, "
        f"!has(v.hostPath) || !(v.hostPath.path in {_SHM}))",
        "'hostIPC: true or a hostPath of /dev/shm shares the host\\'s /dev/shm: mount a "
        "memory emptyDir at /dev/shm instead'",
        """some msg
    host_shm[msg]""",
    ),
)

#: Rego helpers every violation body may use, in Rego v1 syntax (``if``, ``contains``), which
#: OPA 0.59+ reads after ``import rego.v1`` and OPA 1.x reads as is
#: (openpolicyagent.org/docs/latest/opa-1/). Text is lower-cased before matching the
#: (lower-case) patterns, as CEL and ``check`` do (rego-cpp's regex engine lacks ``(?i)``).
REGO_HELPERS = f"""\
shm_paths := {{"/dev/shm", "/dev/shm/"}}

pod := input.review.object

# Gatekeeper's webhook sends UPDATEs too (a label, a finalizer's removal): a pod's containers
# and volumes cannot change then, and denying one would keep a controller from updating or
# deleting a pod admitted before the policy; audit reviews carry no operation
updated if input.review.operation == "UPDATE"

# the Constraint's parameter; the sizing policy's default size when a Constraint has none
default shm_size := "{_DEFAULT_SIZE}"

shm_size := input.parameters.shmSize

host_ipc if {{
    pod.spec.hostIPC == true
}}

volumes := object.get(pod.spec, "volumes", [])

stated := object.get(object.get(pod.metadata, "annotations", {{}}), "shmguard.io/workload", "")

ml_containers := pod.spec.containers if {{
    stated == "ml"
}}

ml_containers := [] if {{
    stated == "container"
}}

ml_containers := [c | c := pod.spec.containers[_]; detected(c)] if {{
    stated != "ml"
    stated != "container"
}}

detected(c) if {{
    regex.match(`{IMAGE_PATTERN}`, lower(object.get(c, "image", "")))
}}

detected(c) if {{
    words := array.concat(object.get(c, "command", []), object.get(c, "args", []))
    regex.match(`{COMMAND_PATTERN}`, lower(concat(" ", words)))
}}

detected(c) if {{
    e := c.env[_]
    regex.match(`{_ENV_RE}`, e.name)
}}

mounts_shm(c) if {{
    m := c.volumeMounts[_]
    shm_paths[m.mountPath]
}}

mounts(c, v) if {{
    m := c.volumeMounts[_]
    m.name == v.name
}}

mounts_at_shm(c, v) if {{
    m := c.volumeMounts[_]
    m.name == v.name
    shm_paths[m.mountPath]
}}

memory := [v | v := volumes[_]; v.emptyDir.medium == "Memory"]

dshm := [v | v := memory[_]; c := pod.spec.containers[_]; mounts_at_shm(c, v)]

spare := [v | v := memory[_]; not mounted_anywhere(v)]

mounted_anywhere(v) if {{
    c := pod.spec.containers[_]
    mounts(c, v)
}}

limited(v) if {{
    c := pod.spec.containers[_]
    mounts(c, v)
    c.resources.limits.memory
}}

medium_ok(m) if m in {{"", "Memory", "HugePages"}}

medium_ok(m) if startswith(m, "HugePages-")

memory_quantities contains q if {{
    v := volumes[_]
    q := {{"where": sprintf("volume %v sizeLimit", [v.name]), "value": sprintf("%v", [v.emptyDir.sizeLimit])}}
}}

memory_quantities contains q if {{
    c := pod.spec.containers[_]
    kind := ["limits", "requests"][_]
    q := {{"where": sprintf("container %v %v.memory", [c.name, kind]), "value": sprintf("%v", [c.resources[kind].memory])}}
}}

host_shm contains msg if {{
    host_ipc
    count(ml_containers) > 0
    msg := "SHM023 host-shm-shared: hostIPC: true shares the host's IPC namespace and /dev/shm with this pod; mount a memory emptyDir at /dev/shm instead"
}}

host_shm contains msg if {{
    v := volumes[_]
    shm_paths[v.hostPath.path]
    msg := sprintf("SHM023 host-shm-shared: volume %v is the host's /dev/shm (hostPath); mount a memory emptyDir at /dev/shm instead", [v.name])
}}
"""  # noqa: E501

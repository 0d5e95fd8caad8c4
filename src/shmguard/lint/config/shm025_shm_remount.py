"""SHM025 shm-remount: the container resizes /dev/shm itself with ``mount -o remount,size=``.

A remount needs CAP_SYS_ADMIN and is blocked by Docker's default AppArmor profile
(``deny mount,`` in moby ``profiles/apparmor/template.go``), so it only works with
``--privileged`` / ``privileged: true`` (or SYS_ADMIN plus an unconfined profile), which gives
the container the host (config_formats.md 1.4, 4.4; Pod Security Baseline forbids both).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shmguard.lint.config._base import CheckOptions, Unit, sources, span_loc
from shmguard.lint.engine import Example, FixAvailability, Rule, RuleDoc, Violation
from shmguard.model import Severity
from shmguard.model.finding import Fix, Location
from shmguard.sources.k8s_model import scalars
from shmguard.sources.yamlnode import YNode, YScalar

_REMOUNT = re.compile(
    r"\bmount\b[^;&|\n]*\bremount\b[^;&|\n]*/dev/shm|"
    r"\bmount\b[^;&|\n]*/dev/shm[^;&|\n]*\bremount\b"
)
_FIX = Fix(
    "Size /dev/shm in the runtime instead",
    "Drop the remount (and privileged / SYS_ADMIN if it was only for this): set shm_size / "
    "--shm-size, or mount a memory-backed emptyDir with a sizeLimit at /dev/shm.",
)


def _words(node: YNode | None) -> str:
    if isinstance(node, YScalar):
        return node.value
    return " ".join(s.value for s in scalars(node))


def _privileged(node: YNode | None, caps: list[str]) -> bool:
    return (isinstance(node, YScalar) and node.yaml11() is True) or any(
        c.upper().removeprefix("CAP_") == "SYS_ADMIN" for c in caps
    )


def _msg(privileged: bool) -> str:
    if privileged:
        return "remounts /dev/shm from inside the container, with privileged or SYS_ADMIN"
    return "remounts /dev/shm from inside the container: fails without privileged/SYS_ADMIN"


def check(unit: Unit, options: CheckOptions) -> Iterator[Violation]:
    """Flag a remount of /dev/shm in a container's command."""
    hits: list[tuple[bool, Location]] = []
    if unit.pod is not None:
        for c, _ in unit.containers:
            for node in (c.command, c.args):
                if node is not None and _REMOUNT.search(_words(node)):
                    priv = _privileged(c.privileged, [x.value for x in c.cap_add])
                    hits.append((priv, node.location()))
                    break
    elif unit.service is not None:
        svc = unit.service
        for node in (svc.entrypoint, svc.command):
            if node is not None and _REMOUNT.search(_words(node)):
                caps = [x.value for x in svc.cap_add]
                hits.append((_privileged(svc.privileged, caps), node.location()))
                break
    elif unit.run is not None:
        rl = unit.run
        words = " ".join(w for w, _, _ in rl.command)
        if rl.command and _REMOUNT.search(words):
            caps = [f.value or "" for f in rl.get("--cap-add")]
            priv = bool(rl.get("--privileged")) or any(
                c.upper().removeprefix("CAP_") == "SYS_ADMIN" for c in caps
            )
            hits.append((priv, span_loc(unit.src, rl.command[0][1], rl.command[-1][2])))
    for priv, where in hits:
        yield Violation(_msg(priv), where, _FIX)


DOC = RuleDoc(
    what=f"""\
A container command (Kubernetes `command`/`args`, Compose `command`/`entrypoint`, the command of
a `docker|podman run` line) that runs `mount -o remount,size=... /dev/shm`.
Sources: {sources("compose", "kubernetes", "docker-run", "podman-run")}.
""",
    why="""\
The remount needs CAP_SYS_ADMIN and is denied by Docker's default AppArmor profile, so it works
only in a privileged container, which can reach the host's devices and kernel settings; Pod
Security Baseline forbids it. Every runtime can size /dev/shm from outside instead.""",
    fix="""\
Drop the remount and size /dev/shm from outside: `shm_size` / `--shm-size`, or an
`emptyDir: {medium: Memory, sizeLimit: ...}` at /dev/shm; then drop `privileged` / `SYS_ADMIN`
if nothing else needs it.
""",
    fix_safety="""\
Display-only: the command and the privileges may serve other purposes.""",
    applies="display-only",
    bad=Example(
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
      command: ["sh", "-c", "mount -o remount,size=8G /dev/shm && python train.py"]
      securityContext: {privileged: true}
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
      command: ["python", "train.py"]
      volumeMounts: [{name: dshm, mountPath: /dev/shm}]
  volumes:
    - name: dshm
      emptyDir: {medium: Memory, sizeLimit: 8Gi}
""",
    ),
)

RULE = Rule(
    code="SHM025",
    name="shm-remount",
    summary="mount -o remount,size=... /dev/shm inside the container (needs privileged)",
    severity=Severity.WARNING,
    fix=FixAvailability.ALWAYS,
    targets=("compose", "kubernetes", "docker-run", "podman-run"),
    why=(
        "Remounting /dev/shm needs CAP_SYS_ADMIN and an unconfined AppArmor profile, in practice "
        "a privileged container; the runtime can size /dev/shm without any of that."
    ),
    doc=DOC,
    check=check,
)

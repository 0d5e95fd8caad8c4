"""``Proposal``: one workload container's proposed sizes (``shmguard recommend --manifests``,
the REC001 rule of :mod:`shmguard.lint.proposal` that writes them). A value of its own, so the
rules' options (:class:`~shmguard.lint.config._base.CheckOptions`) carry proposals without
importing the rule that applies them."""

from __future__ import annotations

from dataclasses import dataclass

from shmguard.model.fix import Change, Setting


@dataclass(frozen=True)
class Proposal:
    """One workload container's proposed sizes, to be written into its manifest.

    Attributes:
        namespace: the workload's namespace ("" matches any); a manifest object without
            ``metadata.namespace`` matches any namespace.
        kind: the workload's kind (``Job/DaemonSet``, a name that cannot tell which, matches
            both).
        name: the workload's name.
        container: the container to give /dev/shm (and the memory limit); "" for a node-mode
            row, which names ``volume`` instead.
        volume: the emptyDir's name in node mode, else "".
        changes: ``shm-size`` (bytes of the emptyDir's ``sizeLimit``) and, when the memory
            limit is to change, ``memory-limit`` (bytes), for ``kubernetes``.
        label: how the report names the workload (``ml/Deployment/train``).
    """

    namespace: str
    kind: str
    name: str
    container: str
    volume: str
    changes: tuple[Change, ...]
    label: str = ""

    def value(self, setting: Setting) -> int | None:
        """The bytes of ``setting`` in :attr:`changes`, or None."""
        return next((c.value for c in self.changes if c.setting is setting), None)

    def matches(self, kind: str, name: str | None, namespace: str | None) -> bool:
        """Whether an object of ``kind``/``name``/``namespace`` is this proposal's workload."""
        kinds = self.kind.split("/") if self.kind == "Job/DaemonSet" else [self.kind]
        if kind not in kinds or name != self.name:
            return False
        return not (namespace and self.namespace and namespace != self.namespace)

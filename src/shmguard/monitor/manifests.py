"""``recommend``'s rows as values to write: which rows get a patch or a manifest edit, and the
:class:`~shmguard.lint.proposal.Proposal` of each (applied by ``recommend --manifests``
through ``check --fix``'s machinery, :func:`shmguard.lint.proposal.apply_proposals`)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from shmguard.lint.proposal import Proposal
from shmguard.model.fix import Change, Setting
from shmguard.monitor.rightsize import WorkloadRecommendation


def manifest_files(paths: list[str]) -> list[str]:
    """The files ``--manifests`` reads for ``paths`` (walked as ``check`` walks them), each
    once: ``k8s`` and ``k8s/train.yaml``, ``./x.yaml`` and ``x.yaml``, a symbolic link and the
    file it names are one file (by its real path), under the first spelling met. Twice, its
    changes were reported twice and ``--diff`` printed two diffs of it, which ``patch``
    cannot apply both."""
    from shmguard.sources.discover import discover

    seen: dict[str, str] = {}
    for path in discover(paths):
        seen.setdefault(os.path.realpath(path), path)
    return list(seen.values())


def workload_name(w: WorkloadRecommendation) -> str:
    """``namespace/Kind/name`` (``volume`` appended in node mode; ``instance/<address>`` for
    a series with no namespace or pod label)."""
    h = w.history
    name = f"{h.workload.kind}/{h.workload.name}"
    if h.namespace:
        name = f"{h.namespace}/{name}"
    return f"{name} ({h.volume})" if h.volume else name


def skip_reason(w: WorkloadRecommendation) -> str | None:
    """Why row ``w`` gets no patch and no manifest edit, or None when it gets them: no size
    proposed, not enough history, no pod label (not a Kubernetes workload), or neither a
    container nor a volume named."""
    h = w.history
    if w.recommendation.shm_size is None:
        return "no size proposed"
    if not w.enough_history:
        return "not enough history"
    if h.workload.source == "instance":
        return "no pod label: not a Kubernetes workload (use the docker snippet)"
    if not h.container and not h.volume:
        return "the series names neither a container nor a volume"
    return None


def memory_to_set(w: WorkloadRecommendation) -> int | None:
    """The memory limit row ``w`` sets, or None: none proposed, or the current one kept."""
    return None if w.memory_change == 0 else w.recommendation.memory_limit.value


def proposals(
    rows: Iterable[WorkloadRecommendation],
) -> tuple[tuple[Proposal, ...], dict[tuple[str, str], str]]:
    """A :class:`Proposal` per row that :func:`skip_reason` lets through: the proposed /dev/shm
    size (written even when it keeps the current one, so a manifest without /dev/shm gets
    the size the workload ran with) and the memory limit when it changes. Returns them and,
    for each other row, ``(workload_name, container) -> why``."""
    out: list[Proposal] = []
    skipped: dict[tuple[str, str], str] = {}
    for w in rows:
        h = w.history
        why = skip_reason(w)
        if why is not None:
            skipped[(workload_name(w), h.container)] = why
            continue
        shm = w.recommendation.shm_size
        assert shm is not None  # skip_reason
        changes = [Change(Setting.SHM_SIZE, shm, ("kubernetes",))]
        mem = memory_to_set(w) if h.container else None
        if mem is not None:
            changes.append(Change(Setting.MEMORY_LIMIT, mem, ("kubernetes",)))
        out.append(
            Proposal(
                h.namespace,
                h.workload.kind,
                h.workload.name,
                h.container,
                h.volume,
                tuple(changes),
                workload_name(w),
            )
        )
    return tuple(out), skipped

"""``recommend --manifests``: what was (or would be) changed in each manifest file, the files
that hold no recommended workload, and the workloads no file holds, as lines (the ``manifests``
member of ``shmguard.recommend/1``: :func:`shmguard.render.json_bodies.manifests_body`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shmguard.lint.proposal import ManifestResult, Proposal
from shmguard.render.escape import printable


def _who(p: Proposal) -> str:
    return f"{p.label} {p.container or '-'}"


def unmatched(results: Sequence[ManifestResult], proposals: Sequence[Proposal]) -> list[Proposal]:
    """The proposals whose object (and container or volume) no file holds."""
    seen = {p for r in results for p in r.matched}
    return [p for p in proposals if p not in seen]


def manifest_lines(
    results: Sequence[ManifestResult],
    proposals: Sequence[Proposal],
    skipped: Mapping[tuple[str, str], str],
    mode: str,
) -> list[str]:
    """One line per change, per file without a recommended workload, per workload without a
    manifest and per row without a proposal (what could not be read goes to stderr, as
    ``check`` prints it). ``mode``: ``fix`` (written), ``diff`` or
    ``show`` (nothing written)."""
    verb = {"fix": "changed", "diff": "would change", "show": "would change"}[mode]
    out: list[str] = []
    for r in results:
        out += [f"{verb} {r.path}: {m}" for m in r.applied]
        out += [f"not changed {r.path}: {m}" for m in r.not_applied]
        out += [f"still in {r.path}: {m}" for m in r.left]
        if not r.matched:
            out.append(f"{r.path}: no recommended workload in it")
        elif not r.applied and not r.not_applied:
            names = ", ".join(dict.fromkeys(_who(p) for p in r.matched))
            out.append(f"{r.path}: already as proposed for {names}")
    for p in unmatched(results, proposals):
        part = f"container {p.container!r}" if p.container else f"volume {p.volume!r}"
        out.append(f"no manifest for {_who(p)}: no {p.kind} {p.name!r} with {part} in --manifests")
    for (name, container), why in skipped.items():
        out.append(f"no edit for {name} {container or '-'}: {why}")
    if mode != "fix" and any(r.applied for r in results):
        out.append(
            "nothing written: --fix writes these changes, --diff shows them as a diff"
            if mode == "show"
            else "nothing written (--diff): --fix writes these changes"
        )
    return [printable(line) for line in out]  # paths and names: control characters escaped

"""Scoring ``explain`` against labelled reports: is the top cause right, did a look-alike get
shm advice, and, where the log alone cannot decide, did explain leave it open and print the
check that decides it?

One definition for the report tests (tests/triage) and the accuracy benchmark
(benchmarks/explain_accuracy.py). A report is a mapping with at least ``kind`` (the
established cause) and ``lookalike`` (True when the cause is not /dev/shm capacity or shm
configuration); an undecidable report (``decidable: false``) also has ``next_step``, the check
that would decide it. The corpus format is described in tests/fixtures/corpus/README.md.

Scoring an undecidable report needs no one to read its log: the report's checks are found in
its ``next_step`` text with the regular expressions of :data:`CHECKS`, and the same
expressions are looked for in what explain printed as steps. That is what lets the held-out
third be scored the same way, once, without tuning anything on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from shmguard.triage.model import Diagnosis, Result

#: Report labels that stand for several catalogue kinds. A label mixes the failure with the
#: runtime that fixed it: a report labelled k8s_emptydir whose log is a DataLoader shm failure
#: is diagnosed as dataloader_shm (the log cannot show it ran in Kubernetes); vLLM's shm
#: failures are NCCL's; 'other' is any cause that is not shm capacity (among them huge pages a
#: container may not use, and a GPU kernel's on-chip shared memory).
ACCEPTS: Mapping[str, frozenset[str]] = {
    "k8s_emptydir": frozenset({"k8s_emptydir", "dataloader_shm"}),
    "compose_config": frozenset({"compose_config", "runtime_config"}),
    "docker_run_config": frozenset({"docker_run_config", "runtime_config"}),
    "vllm_shm": frozenset({"vllm_shm", "nccl_shm"}),
    "other": frozenset({"nccl_shm_attach", "vllm_stall", "info", "other", "hugepages", "gpu_smem"}),
}

#: Labels whose cause is never /dev/shm capacity, whatever the report's ``lookalike`` says.
LOOKALIKE_KINDS = frozenset(
    {
        "cgroup_oom",
        "cuda_oom",
        "nccl_network",
        "disk_full",
        "memlock",
        "mmap_truncated",
        "hugepages",
        "gpu_smem",
        "pg_lock_table",
        "mpi_cma_ptrace",
        "es_bootstrap",
    }
)

#: Catalogue kinds that name a cause other than /dev/shm (the look-alike kinds, the
#: open-files limit, and ``other``: System V limits and the like): a result of one of these
#: kinds says "not /dev/shm".
NOT_SHM_KINDS = LOOKALIKE_KINDS | {"fd_limit", "other"}

#: Remedies of a result that says "/dev/shm is too small or set wrong" (when its kind is not
#: one of :data:`NOT_SHM_KINDS`: memlock-limit's remedy is ``config`` too).
SHM_REMEDIES = frozenset({"shm-size", "config"})

#: The checks that decide an undecidable report, by name: each a regular expression (case
#: insensitive) that finds the check both in a report's ``next_step`` and in the steps explain
#: prints. Written from what the checks are (a command, a file, a log to read), not from any
#: report's wording; a ``next_step`` that none of them finds can only be scored right by its
#: top cause.
CHECKS: Mapping[str, re.Pattern[str]] = {
    name: re.compile(rx, re.IGNORECASE)
    for name, rx in {
        # How big and how full /dev/shm is: df on it, or a tool that reports its size and use.
        "shm-size": (
            r"\bdf(?:\s+-\w+)*\s+/dev/shm\b|\bdf\s+-h\s*\|\s*grep\s+shm\b"
            r"|/dev/shm\s+(?:size|use)\b|\bsize of /dev/shm\b"
        ),
        # What is in /dev/shm: leftovers of dead processes.
        "shm-files": (
            r"\bls\b(?:\s+-\w+)*\s+/dev/shm\b"
            r"|\b(?:stale|orphan(?:ed)?|leftover|old)\b[^.;]{0,40}\bfiles?\b[^.;]{0,20}/dev/shm"
        ),
        # Who may write there.
        "shm-permissions": r"\btest\s+-w\s+/dev/shm\b|\bls\s+-ld\s+/dev/shm\b",
        # The file system a writer wrote to, when it is not /dev/shm.
        "disk-space": (
            r"\bdf(?:\s+-\w+)*`?\)?\s+(?:on|for)\s+(?:[\w'’]+\s+){0,3}?"
            r"(?:file ?system|disk|volume|directory|path|mount|cache)"
            r"|\bdf(?:\s+-\w+)*\s+(?!/dev/shm\b)[~./$]"
            r"|\bDiskUtilization\b"
        ),
        "inodes": r"\bdf\s+-i\b|\binodes?\b",
        # The open-files limit.
        "fd-limit": (
            r"\bulimit\s+-\w*n\b|\bopen[- ]files?\s+limit\b|\bfile[- ]descriptor limit\b"
            r"|\bRLIMIT_NOFILE\b"
        ),
        # The kernel's OOM killer and the memory in use.
        "kernel-oom-log": r"\bdmesg\b|\bjournalctl\s+-k\b|\bkernel (?:OOM )?log\b|\boom_kill\b",
        "host-memory": (
            r"\bfree\s+-[bkmgh]\b|\bhtop\b|\bRSS\b|\bmemory (?:use|usage|graphs?)\b"
            r"|\bmemory\.(?:current|peak|events)\b"
        ),
        # Which signal ended a process.
        "signal": r"\bwhich signal\b|\bsignal (?:name|number)\b",
        # NCCL's own account of the failing call; the interfaces it may use.
        "nccl-debug": r"\bNCCL_DEBUG\b",
        "network-interfaces": r"\bNCCL_SOCKET_IFNAME\b|\bip (?:addr|a|link)\b",
        "numa": r"\bNUMA\b|/sys/devices/system/node\b",
        # System V shared memory, which /dev/shm settings do not govern.
        "sysv-ipc": r"\bipcs\b|\bshmget\b|\bSysV\b|\bSystem V\b",
        "hugepages": r"\bnr_hugepages\b|\bhuge ?pages\b",
        # Processes left by earlier jobs.
        "leftover-processes": (
            r"\bnvidia-smi\b|\bps\s+(?:aux|-ef)\b|\bzombie\b|\borphan(?:ed)? process"
            r"|\bprocesses (?:from|of|left by) (?:earlier|previous|old|dead)"
        ),
        # Where the shm size is set: the pod spec, the container, the platform that launches it.
        "pod-spec": r"\bkubectl\s+(?:get|describe)\s+pod\b|\bpod spec\b|\bpod mounts?\b",
        "container": (
            r"\bwhich container\b|\bIPC namespaces?\b|\bdocker inspect\b|\bHostConfig\.ShmSize\b"
        ),
        "platform-setting": (
            r"\b(?:platform|launcher)\b[^.;]{0,80}\bshm\b|\bshm\b[^.;]{0,80}\b(?:platform|launcher)\b"
        ),
        # Whether the DataLoader's workers are the cause.
        "no-workers": r"\bnum_workers\s*=\s*0\b",
    }.items()
}


def accepts(kind: str) -> frozenset[str]:
    """The catalogue kinds that count as right for a report labelled ``kind``."""
    return ACCEPTS.get(kind, frozenset({kind}))


def checks_in(text: str) -> tuple[str, ...]:
    """The names of the :data:`CHECKS` that ``text`` mentions, in table order."""
    return tuple(name for name, rx in CHECKS.items() if rx.search(text))


def printed_steps(diagnosis: Diagnosis) -> tuple[tuple[str, str], ...]:
    """What explain printed as the way to decide, as (where, text) pairs: the top result's
    ``decide`` text (where ``decide``, when it has one) and the diagnosis's ``next_steps``
    (where ``next steps``; the general list printed when no cause of medium confidence or more
    matched). The fix's own steps are not counted: they say what to do, not what decides."""
    top = diagnosis.results[0] if diagnosis.results else None
    head = (("decide", top.decide),) if top is not None and top.decide else ()
    return (*head, *(("next steps", step) for step in diagnosis.next_steps))


def _says_shm(r: Result) -> bool | None:
    """True when ``r`` names /dev/shm capacity or configuration as the cause, False when it
    names a cause that is not /dev/shm, None when it names neither (``investigate``)."""
    if r.kind in NOT_SHM_KINDS:
        return False
    if r.remedy in SHM_REMEDIES:
        return True
    if r.remedy in ("memory", "fd-limit"):
        return False
    return None


def contradicts(r: Result, kind: str, lookalike: bool) -> bool:
    """Whether ``r`` claims, with high confidence, a cause on the other side of the label:
    /dev/shm for a look-alike, or not /dev/shm for a shm report. Only unexplained causes of
    ``high`` confidence whose kinds are not accepted for ``kind`` count."""
    if r.role != "cause" or r.explained_by is not None or r.confidence != "high":
        return False
    if {r.kind, *r.also} & accepts(kind):
        return False
    says = _says_shm(r)
    return says is lookalike


@dataclass(frozen=True)
class Score:
    """How ``explain`` did on one report.

    Attributes:
        top: the id of the top result, or None when nothing matched.
        right: the top result's kind (or one it lists in ``also``) is accepted for the label.
        lookalike: the report's cause is not /dev/shm.
        shm_advice: some result printed a /dev/shm size (wrong for a look-alike).
        open: the report is undecidable, the top cause is not right, and explain left it
            open with the right check: see :func:`score`.
        check: the name (in :data:`CHECKS`) of the report's check that explain printed, or
            None (always None for a report that is decidable or right).
        check_from: where it was printed: ``decide`` (the top result's) or ``next steps``
            (the general list), or None.
    """

    top: str | None
    right: bool
    lookalike: bool
    shm_advice: bool
    open: bool = False
    check: str | None = None
    check_from: str | None = None


def score(report: Mapping[str, object], diagnosis: Diagnosis) -> Score:
    """Score ``diagnosis`` (of the report's log) against the report's label.

    ``right``: the top result's kind, or one in its ``also``, is accepted for ``kind``
    (:func:`accepts`), or for the report's optional ``log_kind``: the failure the log shows
    when the established cause is a setting the log cannot show (the report's label says
    Compose's ``shm_size`` fixed it; the log is a torch shm failure with no Compose line).

    ``open`` (right as undecided) holds for a report with ``decidable: false`` that is not
    ``right`` when all of these hold:

    1. one of the report's checks (the :data:`CHECKS` its ``next_step`` mentions) is in what
       explain printed to decide (:func:`printed_steps`: the top result's ``decide`` and the
       diagnosis's ``next_steps``; a check found in both is credited to ``decide``);
    2. no result contradicts the label with high confidence (:func:`contradicts`): a
       ``high`` cause that says /dev/shm for a look-alike, or says "not /dev/shm" (a
       look-alike kind, the memory or open-files limit) for a shm report. A ``high`` cause on
       the label's own side (``/dev/shm ran out`` for a report whose label says which shm
       setting did not apply) leaves the rest to the check, and counts as open;
    3. a look-alike got no /dev/shm size (``shm_advice`` is False).

    A report's ``next_step`` that mentions none of :data:`CHECKS` is never open.
    """
    kind = str(report["kind"])
    lookalike = bool(report.get("lookalike")) or kind in LOOKALIKE_KINDS
    top = diagnosis.results[0] if diagnosis.results else None
    accepted = accepts(kind)
    if report.get("log_kind"):
        accepted |= accepts(str(report["log_kind"]))
    right = top is not None and bool({top.kind, *top.also} & accepted)
    advice = any(
        r.fix is not None and r.fix.shm_size is not None and r.explained_by is None
        for r in diagnosis.results
    )
    is_open = False
    check: str | None = None
    where: str | None = None
    if not report.get("decidable", True) and not right:
        wanted = checks_in(str(report.get("next_step") or ""))
        found = [(c, w) for w, text in printed_steps(diagnosis) for c in checks_in(text)]
        check, where = next(((c, w) for c, w in found if c in wanted), (None, None))
        clash = any(contradicts(r, kind, lookalike) for r in diagnosis.results)
        is_open = check is not None and not clash and not (lookalike and advice)
    return Score(top.id if top else None, right, lookalike, advice, is_open, check, where)

"""From matches to a ranked diagnosis: confidence, explanations, runtime, order, next steps.

Rules (all data-driven by the signature files):

* a result's confidence is the highest confidence of the patterns it matched, raised by any
  ``[[boost]]`` whose ``when`` signatures also matched;
* a result whose ``explained_by`` signature matched is a consequence: it ranks after the
  causes with confidence ``low`` and gets no fix of its own;
* ranking: causes before information, then confidence, then ``priority``, then the line
  where it first matched;
* the runtime is ``--runtime``, else the one the log's own markers point to, with the lines
  that show it (:mod:`shmguard.triage.runtime`); the fixes are for that runtime, or, when the
  log only hints at it (``low``), for every runtime with that one first;
* when a shared-memory failure and an OOM kill both appear in one input, the order is
  reported with what it means;
* exit status 1 when a cause of medium confidence or more matched, else 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from shmguard.estimate.policy import Policy, Sized
from shmguard.triage.fixes import Captured, plan_fix
from shmguard.triage.matchers import Matcher, Tally
from shmguard.triage.model import (
    CONFIDENCES,
    FACT_CAPTURES,
    Diagnosis,
    Evidence,
    Fact,
    InputSummary,
    Result,
    confidence_rank,
)
from shmguard.triage.model import (
    Sequence as Order,
)
from shmguard.triage.runtime import infer_runtime
from shmguard.units import format_iec

#: Said when nothing of medium confidence or more matched.
NEXT_STEPS = (
    "Run `shmguard doctor` inside the container (or pod) that failed: it reports the /dev/shm "
    "size and use, the memory limit and the open-files limit.",
    "Capture the first error, not only the last: the full stderr of the job, "
    "`docker logs CONTAINER` or `kubectl logs POD --previous` plus `kubectl describe pod POD` "
    "(events, Last State, exit code).",
    "Look for kernel OOM kills on the host: `dmesg -T | grep -i -E 'killed process|oom'` "
    "or `journalctl -k`.",
    "For NCCL errors, rerun with `NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=INIT,SHM,NET`): "
    "the WARN lines name the failing call.",
    "For DataLoader failures, rerun once with `num_workers=0` to see the real exception, and "
    "set `DataLoader(timeout=600)` so a stalled loader raises instead of hanging.",
    "If the log just stops with no error, look at disk and memory where the job ran: `df -h` on "
    "each directory it writes to (outputs, checkpoints, caches) and the platform's metrics "
    "(SageMaker's DiskUtilization and MemoryUtilization, `kubectl top pod`).",
)


def _confidence(t: Tally, matched: set[str]) -> str:
    sig = t.signature
    best = 0
    for p in sig.patterns:
        if p.name in t.patterns and not p.marker:
            best = max(best, confidence_rank(p.confidence or sig.confidence))
    for b in sig.boosts:
        if any(w in matched for w in b.when):
            best = max(best, confidence_rank(b.confidence))
    return CONFIDENCES[best]


def _facts(tallies: Sequence[Tally]) -> dict[str, tuple[int, Evidence]]:
    out: dict[str, tuple[int, Evidence]] = {}
    order: dict[str, tuple[int, int]] = {}
    for t in tallies:
        for name, (value, ev) in t.captures.items():
            if name not in FACT_CAPTURES or name in ("shm_need", "shm_suggested"):
                continue
            pos = t.first_pos or (0, ev.line)
            if name not in out or pos < order[name]:
                out[name] = (value, ev)
                order[name] = pos
    return out


def _sequence(results: Sequence[Result], tallies: dict[str, Tally]) -> tuple[Order, ...]:
    shm = [r for r in results if r.remedy == "shm-size" and r.role == "cause"]
    oom = [r for r in results if r.kind == "cgroup_oom"]
    if not shm or not oom:
        return ()

    def first(rs: Sequence[Result]) -> tuple[Result, tuple[int, int]]:
        pairs = [(r, tallies[r.id].first_pos or (0, 0)) for r in rs]
        return min(pairs, key=lambda rp: rp[1])

    s, s_pos = first(shm)
    o, o_pos = first(oom)
    if s_pos[0] != o_pos[0]:
        return ()
    file = s.evidence[0].file
    if s_pos < o_pos:
        meaning = (
            f"The shared-memory failure (line {s_pos[1]}) came before the OOM kill "
            f"(line {o_pos[1]}): /dev/shm filled up first. tmpfs pages count against the "
            "container's memory limit, so raise /dev/shm and raise the memory limit by the "
            "same amount, or the bigger /dev/shm will be OOM-killed next."
        )
        return (Order(s.id, s_pos[1], o.id, o_pos[1], file, meaning),)
    meaning = (
        f"The OOM kill (line {o_pos[1]}) came before the shared-memory failure "
        f"(line {s_pos[1]}): the memory limit was hit first and the shm errors are most likely "
        "a consequence (workers dying, or shm pages charged to the same limit). Fix the memory "
        "limit first; if you also grow /dev/shm, grow the memory limit by the same amount."
    )
    return (Order(o.id, o_pos[1], s.id, s_pos[1], file, meaning),)


def _shm_above_limit(facts: dict[str, tuple[int, Evidence]]) -> str | None:
    """A note when the log shows a /dev/shm at least as large as the memory limit.

    tmpfs pages are charged to the memory cgroup of the process that writes them (Linux
    Documentation/admin-guide/cgroup-v2.rst, "Memory": shmem is part of a cgroup's memory), so
    such a /dev/shm can never be filled: the container is OOM-killed first. ``check`` reports
    the same thing in a manifest as SHM009.
    """
    if "shm_total" not in facts or "mem_limit" not in facts:
        return None
    (shm, s_ev), (mem, m_ev) = facts["shm_total"], facts["mem_limit"]
    if shm < mem:
        return None
    return (
        f"/dev/shm ({format_iec(shm)}, line {s_ev.line}) is not smaller than the memory limit "
        f"({format_iec(mem)}, line {m_ev.line}): tmpfs pages count against the memory limit, "
        "so filling /dev/shm gets the container OOM-killed before /dev/shm is full. Keep "
        "/dev/shm below the limit with room for the processes beside it (check reports this "
        "as SHM009)."
    )


def diagnose(
    matcher: Matcher,
    *,
    runtime: str | None = None,
    shm_override: int | Sized | None = None,
    policy: Policy | None = None,
) -> Diagnosis:
    """Rank what ``matcher`` found and attach fixes.

    Args:
        matcher: a :class:`~shmguard.triage.matchers.Matcher` that has been fed every input.
        runtime: ``--runtime`` (a name of :data:`~shmguard.triage.model.LOG_RUNTIMES` or
            ``app``) or None to infer it from the log.
        shm_override: ``--shm-size`` in bytes, a size chosen elsewhere with its basis, or
            None to choose one.
        policy: the sizing policy for the fixes (default :class:`~shmguard.estimate.Policy`).
    """
    tallies = list(matcher.tallies.values())
    by_id = {t.signature.id: t for t in tallies}
    matched_causes = {t.signature.id for t in tallies if t.signature.role == "cause"}
    matched_all = set(by_id)
    facts = _facts(tallies)
    guess = infer_runtime(tallies, runtime)
    # A runtime the log only hints at leads the fixes instead of replacing the others.
    weak = guess.source == "log" and guess.confidence == "low"
    fix_rt = None if weak else guess.name
    lead = guess.name if weak else None
    host = [t for t in tallies if t.signature.host_shm and t.first]
    host_ev = min(host, key=lambda t: t.first_pos or (0, 0)).first[0] if host else None
    loader, loader_gap = matcher.loader.need(policy), matcher.loader.gap()

    results: list[Result] = []
    for t in tallies:
        sig = t.signature
        if sig.role == "context":
            continue
        base = _confidence(t, matched_all)
        explained = next((e for e in sig.explained_by if e in matched_causes), None)
        conf = "low" if explained else base
        notes = tuple(
            dict.fromkeys(p.note for p in sig.patterns if p.note and p.name in t.patterns)
        )
        fix = None
        if sig.role == "cause" and explained is None and sig.fix is not None:
            captured: Captured = t.captures
            fix = plan_fix(
                sig,
                captured,
                facts,
                fix_rt,
                shm_override,
                host_ev,
                policy,
                matched_all,
                lead=lead,
                loader=loader,
                loader_gap=loader_gap,
            )
        results.append(
            Result(
                id=sig.id,
                title=sig.title,
                kind=sig.kind,
                also=sig.also,
                role=sig.role,
                remedy=sig.remedy,
                confidence=conf,
                base_confidence=base,
                explained_by=explained,
                cause=sig.cause,
                decide=sig.decide,
                notes=notes,
                matches=t.matches,
                evidence=t.evidence,
                references=sig.references,
                fix=fix,
            )
        )

    def key(r: Result) -> tuple[int, int, int, int, tuple[int, int]]:
        t = by_id[r.id]
        return (
            0 if r.role == "cause" else 1,
            1 if r.explained_by else 0,
            -confidence_rank(r.confidence),
            -t.signature.priority,
            t.first_pos or (0, 0),
        )

    results.sort(key=key)
    strong = [r for r in results if r.role == "cause" and confidence_rank(r.confidence) >= 1]
    exit_code = 1 if strong else 0
    next_steps = () if strong else NEXT_STEPS
    fact_list = tuple(
        Fact(name, value, ev.file, ev.line, ev.text) for name, (value, ev) in sorted(facts.items())
    )
    inputs = tuple(InputSummary(n, b, ln, bi) for n, b, ln, bi in matcher.inputs)
    reading_notes = [
        f"{i.name} looks binary (many control bytes): only its text lines could match."
        for i in inputs
        if i.binary
    ]
    above = _shm_above_limit(facts)
    if above:
        reading_notes.append(above)
    if matcher.backend != "ac":
        reading_notes.append(
            "The fast literal pre-filter (the ahocorasick-rs package) is not installed: "
            "large logs are read about 30x slower."
        )
    return Diagnosis(
        inputs=inputs,
        runtime=guess.name,
        runtime_source=guess.source,
        runtime_confidence=guess.confidence,
        runtime_evidence=guess.evidence,
        facts=fact_list,
        results=tuple(results),
        sequence=_sequence(results, by_id),
        next_steps=next_steps,
        exit_code=exit_code,
        signatures_loaded=len(matcher.signatures),
        notes=tuple(reading_notes),
    )

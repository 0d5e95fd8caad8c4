"""Turn a matched signature into a fix for one runtime: choose a /dev/shm size, say how it
was chosen, and give it as fix values (:class:`~shmguard.model.fix.Change`) that the snippet
renderer writes in each runtime's syntax. A platform without a /dev/shm setting of its own
(Slurm, Apptainer, SageMaker, AzureML, Databricks, Colab: :data:`~shmguard.model.fix.PLATFORMS`)
gets the size and a sentence (:data:`~shmguard.model.fix.PLATFORM_NOTES`) instead of a snippet.

Size choice, first rule that applies:

1. ``--shm-size`` given by the user;
2. a size the log itself suggests (Ray prints ``--shm-size=12.34gb``);
3. a size the log says was requested (``shm_need``) times the signature's ``need_factor``
   (Ray's object store: 1.1, as Ray's own hint);
4. for a DataLoader failure (a signature of a kind in :data:`MODELLED_KINDS`), the DataLoader
   model's predicted peak for the loader the log (or a configuration read with it) shows
   (:mod:`shmguard.triage.loader_seen`), with the policy's headroom: the size ``shmguard plan``
   gives for that loader;
5. twice the /dev/shm size (or free space) the log shows (``df``, a mount line, an emptyDir
   ``sizeLimit``, ``--shm-size`` on a ``docker run`` line), when that is more than the
   starting point of rule 6;
6. the signature's ``default``, for the reason its ``basis`` gives; for a DataLoader failure
   the sizing policy's default instead (1 GiB, ``[tool.shmguard.sizes]``), with the pointer to
   ``shmguard measure``, ``plan`` and ``probe``: a DataLoader's need is what the model says of
   its parameters, and the 8 GiB upstream projects document (detectron2 #384) is many times
   what most loaders need (4 workers of 32 images at 224x224 need 245 MiB: ``plan`` gives
   320 MiB); their signature files carry no ``default`` or ``floor`` (the loader refuses one).

A size from the log (rules 2 and 3) must make sense against what the failing job already
had: when the log also shows the job's /dev/shm size or free space, a suggestion less than
that plus the policy's headroom (25%) is a tool's own hint capped by what it found (Ray
suggests ``--shm-size=0.07gb`` when a 64 MiB /dev/shm capped its object store) and rule 5
applies instead. Whatever the rule, the size is never at or below the /dev/shm the log shows
(:func:`~shmguard.estimate.policy.default_shm_size` with ``too_small``: twice it) nor at or
below a size the log says was requested and failed
(:func:`~shmguard.estimate.policy.shm_size_for`: the request plus headroom). Only the user's
``--shm-size`` is taken as given.

The result is raised to the signature's ``floor`` (not for a DataLoader failure: the model or
the policy's default decides) and rounded up by the one sizing policy
(:func:`shmguard.estimate.policy.clean_size`). The rules are the one size decision's
(:func:`shmguard.estimate.decide.choose_shm`); this module only reads the log's evidence for it
(:func:`size_evidence`). tmpfs pages count against the memory limit (Linux memcg), so when the
log shows the memory limit it is evidence too (the policy's default is capped by it, as in
``check --fix``, the webhook and ``doctor``), and the fix's memory limit is the decision's
``Sized.memory_limit``: the limit to raise to when the size does not fit beside the policy's
margin (the room the job had plus the size, :func:`shmguard.estimate.policy.memory_limit_for`),
none when it fits. Only a ``--shm-size``, which the decision takes as given without the check,
grows the limit the log shows by its size.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from shmguard.estimate.decide import Documented, LogSize, Need, RanShort, ShmEvidence, choose_shm
from shmguard.estimate.policy import Policy, Sized, memory_limit_for
from shmguard.model.fix import PLATFORM_NOTES, PLATFORMS, RUNTIMES, Change, shm_changes
from shmguard.triage.model import MODELLED_KINDS as MODELLED_KINDS
from shmguard.triage.model import Evidence, FixPlan, Signature, SizeRule
from shmguard.units import DOCKER_DEFAULT_SHM, format_iec

#: Shown with every shm-size fix: the size above is a starting point, these measure it.
MEASURE_HINT = (
    "Measure the real peak with `shmguard measure -- <your command>` "
    "(or find the smallest size that works with `shmguard probe`)."
)

#: Shown with a DataLoader failure's size when the log shows neither a size nor the loader.
PLAN_HINT = (
    "Or predict it before a run from the loader's parameters: `shmguard plan --batch-size N "
    "--sample-shape C,H,W --num-workers W` (`explain` does the same when the log or a file "
    "given with it shows num_workers and a batch's torch.Size)."
)


Captured = Mapping[str, tuple[int, Evidence]]


def _had(captured: Captured, facts: Captured) -> tuple[int, Evidence, str] | None:
    """The largest /dev/shm size or free space the log shows the failing job had: bytes, the
    line, and ``size`` or ``free space``."""
    seen = [
        (value, ev, "size" if name == "shm_total" else "free space")
        for name in ("shm_total", "shm_avail")
        for found in (captured.get(name), facts.get(name))
        if found is not None
        for value, ev in (found,)
    ]
    return max(seen, key=lambda s: s[0]) if seen else None


def size_evidence(
    rule: SizeRule,
    captured: Captured,
    facts: Captured,
    flag: int | None = None,
    *,
    loader: Need | None = None,
    modelled: bool = False,
) -> ShmEvidence:
    """What a log says about a /dev/shm size, as evidence for the one size decision
    (module docstring, rules 1-6): ``--shm-size`` (``flag``); a size the log suggests (a
    tool's hint) or a request times the signature's ``need_factor`` (a stated size); a
    request that failed (a lower bound); ``loader``, the DataLoader model's predicted peak for
    the loader the log shows (the model's evidence, used when ``modelled``: a signature of
    :data:`MODELLED_KINDS`); the largest /dev/shm size or free space the log shows (it ran
    short); the signature's ``default`` and ``floor`` (a documented size; not when
    ``modelled``); the memory limit the log shows, and the runtimes' 64 MiB /dev/shm as the
    one there now when the log shows none (so the default is never capped to it)."""
    log: LogSize | None = None
    if "shm_suggested" in captured:
        value, ev = captured["shm_suggested"]
        log = LogSize(
            value, f"the size the log itself suggests ({format_iec(value)}, line {ev.line})"
        )
    elif "shm_need" in captured and rule.need_factor is not None:
        value, ev = captured["shm_need"]
        log = LogSize(
            int(value * rule.need_factor),
            f"{rule.need_factor:g} × the {format_iec(value)} requested at line {ev.line}, "
            "rounded up",
            hint=False,
        )
    request: Need | None = None
    if "shm_need" in captured:
        need, ev = captured["shm_need"]
        request = Need(need, f"requested at line {ev.line}")
    ran_short: RanShort | None = None
    had = _had(captured, facts)
    if had is not None:
        value, ev, what = had
        ran_short = RanShort(
            value,
            shown=f"the /dev/shm {what} the log shows ({format_iec(value)}, line {ev.line})",
            had=f"the {format_iec(value)} /dev/shm {what} the job already had (line {ev.line})",
        )
    mem = facts.get("mem_limit")
    return ShmEvidence(
        flag=flag,
        log=log,
        request=request,
        model=loader if modelled else None,
        ran_short=ran_short,
        documented=(
            Documented(rule.default, rule.basis, rule.floor)
            if not modelled and rule.default is not None and rule.floor is not None
            else None
        ),
        memory_limit=mem[0] if mem else None,
        current=None if ran_short else DOCKER_DEFAULT_SHM,
    )


def choose_size(
    rule: SizeRule,
    captured: Captured,
    facts: Captured,
    override: int | Sized | None,
    policy: Policy | None = None,
    *,
    loader: Need | None = None,
    modelled: bool = False,
    loader_gap: str = "no DataLoader parameters (num_workers and a batch's torch.Size)",
) -> Sized:
    """A /dev/shm size in bytes and how it was chosen: the one size decision
    (:func:`~shmguard.estimate.decide.choose_shm`) over :func:`size_evidence` (``loader`` and
    ``modelled`` as there; ``loader_gap``: what the log shows of the loader when it shows too
    little, for the default's basis). ``override``: bytes given with ``--shm-size``, or a size
    chosen elsewhere with its own basis (``run --watch``: the DataLoader model for the loader
    its sampler saw)."""
    if isinstance(override, Sized):
        return override
    evidence = size_evidence(rule, captured, facts, override, loader=loader, modelled=modelled)
    sized = choose_shm(evidence, policy)
    if modelled and sized.source == "default":
        rest = sized.basis.removeprefix("the default")
        had = evidence.ran_short
        if had is None:
            said = f"the log shows no /dev/shm size and {loader_gap}: the sizing policy's"
        else:
            said = f"the log shows {loader_gap}, and twice {had.shown_text()} is less than the"
            said += " sizing policy's"
        return replace(sized, basis=f"{said} default{rest}")
    return sized


def host_ipc_note(ev: Evidence) -> str:
    """What to do about /dev/shm when the container shares the host's IPC namespace."""
    return (
        f"The container uses the host's IPC namespace ({ev.file} line {ev.line}): its /dev/shm "
        "is the host's, and --shm-size / shm_size are ignored (Docker) or refused (Podman). "
        "Check `df -h /dev/shm` on the host and remove stale files there, or drop host IPC "
        "and give the container its own /dev/shm with --shm-size."
    )


def plan_fix(
    sig: Signature,
    captured: Captured,
    facts: Captured,
    runtime: str | None,
    override: int | Sized | None,
    host_shm: Evidence | None = None,
    policy: Policy | None = None,
    matched: Collection[str] = (),
    *,
    lead: str | None = None,
    loader: Need | None = None,
    loader_gap: str = "no DataLoader parameters (num_workers and a batch's torch.Size)",
) -> FixPlan:
    """The fix for ``sig`` on ``runtime``: a runtime of :data:`~shmguard.model.fix.RUNTIMES`
    (its snippet), a platform of :data:`~shmguard.model.fix.PLATFORMS` (the size, no snippet:
    the signature's sentence for that platform, else the platform's
    :data:`~shmguard.model.fix.PLATFORM_NOTES` entry), None (unknown: every runtime, each
    sentence prefixed with its runtime) or ``app`` (only the application side).

    ``lead``: with ``runtime`` None, a runtime the log hints at; its snippet and sentence come
    first. ``host_shm``: a line showing the container uses the host's IPC namespace; then no
    size snippet is printed (Docker ignores ``--shm-size`` with ``--ipc=host``, Podman rejects
    it: docs.docker.com/reference/cli/docker/container/run, podman #14609), and the fix says
    what to do on the host instead. ``matched``: the ids of every signature that matched the
    same inputs; a size rule with ``when`` gives a size only when one of its ids is among them.
    ``loader``: the DataLoader model's predicted peak for the loader the inputs show
    (:meth:`~shmguard.triage.loader_seen.LoaderSeen.need`), the size of a DataLoader failure;
    ``loader_gap``, what they show of it when that is too little
    (:meth:`~shmguard.triage.loader_seen.LoaderSeen.gap`).

    Raises:
        ValueError: ``sig`` has no ``fix`` (only cause signatures have one).
    """
    if sig.fix is None:
        raise ValueError(f"signature {sig.id} has no fix")
    spec = sig.fix
    size: Sized | None = None
    memory: int | None = None
    changes: tuple[Change, ...] = ()
    nxt = list(spec.next)
    wants_size = sig.remedy in ("shm-size", "config") and sig.size is not None
    applies = (
        sig.size is not None
        and (not sig.size.runtimes or runtime is None or runtime in sig.size.runtimes)
        and (not sig.size.when or any(w in matched for w in sig.size.when))
    )
    if wants_size and host_shm is not None and runtime != "app":
        nxt.insert(0, host_ipc_note(host_shm))
    elif wants_size and runtime != "app" and sig.size is not None and applies:
        modelled = sig.kind in MODELLED_KINDS
        size = choose_size(
            sig.size,
            captured,
            facts,
            override,
            policy,
            loader=loader,
            modelled=modelled,
            loader_gap=loader_gap,
        )
        # The memory limit is the decision's (a size the limit shown cannot hold beside the
        # policy's margin: the limit to raise to). A --shm-size is taken as given, unchecked
        # by the decision: the limit then grows by it, as it always did.
        memory = size.memory_limit
        if memory is None and size.source == "flag" and "mem_limit" in facts:
            memory = memory_limit_for(
                size.bytes, policy or Policy(), current_limit=facts["mem_limit"][0]
            )
        chosen: tuple[str, ...]
        if runtime is None:
            chosen = _lead_first(RUNTIMES, lead)
        else:
            chosen = (runtime,) if runtime in RUNTIMES else ()
        if sig.size.runtimes:
            chosen = tuple(r for r in chosen if r in sig.size.runtimes)
        changes = shm_changes(size.bytes, memory, chosen) if chosen else ()
        if sig.remedy == "shm-size":
            nxt.append(MEASURE_HINT)
            if modelled and size.source in ("default", "ran-short"):
                nxt.append(PLAN_HINT)
    notes: list[str] = []
    if not (sig.remedy == "shm-size" and host_shm is not None):
        # (with host IPC the sentences, which size /dev/shm per container, do not apply)
        table = dict(spec.runtimes)
        for name in PLATFORMS:
            if size is not None and name not in table and name in (runtime, lead):
                table[name] = PLATFORM_NOTES[name]
        if runtime is None:
            notes = [f"{name}: {table[name]}" for name in _lead_first(tuple(table), lead)]
        elif runtime in table:
            notes = [table[runtime]]
    return FixPlan(
        summary=spec.summary,
        runtime=runtime,
        shm_size=size,
        memory_limit=memory,
        changes=changes,
        runtime_notes=tuple(notes),
        app=spec.app,
        next=tuple(nxt),
    )


def _lead_first(names: tuple[str, ...], lead: str | None) -> tuple[str, ...]:
    """``names`` with ``lead`` moved to the front when it is among them."""
    if lead is None or lead not in names:
        return names
    return (lead, *(n for n in names if n != lead))

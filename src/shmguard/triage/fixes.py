"""Turn a matched signature into a fix for one runtime: choose a /dev/shm size, say how it
was chosen, and give it as fix values (:class:`~shmguard.model.fix.Change`) that the snippet
renderer writes in each runtime's syntax.

Size choice, first rule that applies:

1. ``--shm-size`` given by the user;
2. a size the log itself suggests (Ray prints ``--shm-size=12.34gb``);
3. a size the log says was requested (``shm_need``) times the signature's ``need_factor``
   (Ray's object store: 1.1, as Ray's own hint);
4. twice the /dev/shm size (or free space) the log shows (``df``, a mount line, an emptyDir
   ``sizeLimit``), when that is more than the signature's ``default``;
5. the signature's ``default``, for the reason its ``basis`` gives.

The result is raised to the signature's ``floor`` and rounded up by the one sizing policy
(:func:`shmguard.estimate.policy.clean_size`). tmpfs pages count against the memory limit
(Linux memcg), so when the log shows the memory limit, the limit in the fix grows by the shm
size (:func:`shmguard.estimate.policy.memory_limit_for`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from shmguard.estimate.policy import Policy, clean_size, default_shm_size, memory_limit_for
from shmguard.model.fix import RUNTIMES, Change, shm_changes
from shmguard.triage.model import Evidence, FixPlan, Signature, SizeChoice, SizeRule
from shmguard.units import format_iec

#: Shown with every shm-size fix: the size above is a starting point, these measure it.
MEASURE_HINT = (
    "Measure the real peak with `shmguard measure -- <your command>` "
    "(or find the smallest size that works with `shmguard probe`)."
)

Captured = Mapping[str, tuple[int, Evidence]]


def choose_size(
    rule: SizeRule,
    captured: Captured,
    facts: Captured,
    override: int | None,
    policy: Policy | None = None,
) -> SizeChoice:
    """A /dev/shm size in bytes and how it was chosen (module docstring, rules 1-5)."""
    if override is not None:
        return SizeChoice(override, "the size given with --shm-size")
    if "shm_suggested" in captured:
        value, ev = captured["shm_suggested"]
        n = clean_size(value)
        return SizeChoice(
            n, f"the size the log itself suggests ({format_iec(value)}, line {ev.line})"
        )
    method: str
    if "shm_need" in captured and rule.need_factor is not None:
        value, ev = captured["shm_need"]
        n = int(value * rule.need_factor)
        method = (
            f"{rule.need_factor:g} × the {format_iec(value)} requested at line {ev.line}, "
            "rounded up"
        )
    elif "shm_total" in captured or "shm_total" in facts or "shm_avail" in captured:
        name = "shm_total" if "shm_total" in captured or "shm_total" in facts else "shm_avail"
        value, ev = captured.get(name) or facts[name]
        what = "size" if name == "shm_total" else "free space"
        base = policy or Policy()
        n = default_shm_size(replace(base, default_shm_size=rule.default), too_small=value).bytes
        if 2 * value >= rule.default:
            method = (
                f"twice the /dev/shm {what} the log shows ({format_iec(value)}, line {ev.line})"
            )
        else:
            n = rule.default
            method = (
                f"the usual starting point, more than twice the /dev/shm {what} the log shows "
                f"({format_iec(value)}, line {ev.line}): {rule.basis}"
            )
    else:
        n = rule.default
        method = f"a starting point: {rule.basis}"
    if n < rule.floor:
        n = rule.floor
        method += f"; raised to {format_iec(rule.floor)}, the least that usually helps here"
    return SizeChoice(clean_size(n), method)


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
    override: int | None,
    host_shm: Evidence | None = None,
    policy: Policy | None = None,
    matched: Collection[str] = (),
) -> FixPlan:
    """The fix for ``sig`` on ``runtime`` (None: unknown, every runtime; ``app``: only the
    application side). ``host_shm``: a line showing the container uses the host's IPC
    namespace; then no size snippet is printed (Docker ignores ``--shm-size`` with
    ``--ipc=host``, Podman rejects it: docs.docker.com/reference/cli/docker/container/run,
    podman #14609), and the fix says what to do on the host instead. ``matched``: the ids
    of every signature that matched the same inputs; a size rule with ``when`` gives a size
    only when one of its ids is among them.

    Raises:
        ValueError: ``sig`` has no ``fix`` (only cause signatures have one).
    """
    if sig.fix is None:
        raise ValueError(f"signature {sig.id} has no fix")
    spec = sig.fix
    size: SizeChoice | None = None
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
        size = choose_size(sig.size, captured, facts, override, policy)
        if "mem_limit" in facts:
            memory = memory_limit_for(
                size.bytes, policy or Policy(), current_limit=facts["mem_limit"][0]
            )
        chosen: tuple[str, ...] = RUNTIMES if runtime is None else (runtime,)
        if sig.size.runtimes:
            chosen = tuple(r for r in chosen if r in sig.size.runtimes)
        changes = shm_changes(size.bytes, memory, chosen) if chosen else ()
        if sig.remedy == "shm-size":
            nxt.append(MEASURE_HINT)
    notes = []
    for name, text in spec.runtimes:
        if sig.remedy == "shm-size" and host_shm is not None:
            break  # the sentences size /dev/shm per container: not with host IPC
        if runtime is None or name == runtime or (runtime == "app" and name == "app"):
            notes.append(f"{name}: {text}" if runtime is None else text)
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

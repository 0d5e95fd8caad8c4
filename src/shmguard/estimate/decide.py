"""The one /dev/shm size decision: evidence -> :class:`~shmguard.estimate.policy.Sized`.

Every command that prints or writes a /dev/shm size builds a :class:`ShmEvidence` from what it
knows and calls :func:`choose_shm`; none chooses by itself. docs/background.md, "How shmguard
sizes", states the same rules for users.

Precedence (the first slot that gives a size decides; ``Sized.source`` names it):

1. ``flag``: a size the user gave (``--shm-size``), taken as given; nothing below applies.
2. ``configured``: the ``shmguard.io/shm-size`` annotation or a configured size, as
   ``(name, text)`` read with :func:`shmguard.units.parse_size_annotation` (or bytes). Text
   that does not parse, or 0, is a problem (``Sized.problems``) and the next slot decides.
   Taken as given otherwise.
3. ``log``: a size a log states or suggests (Ray's ``--shm-size=12.34gb``, a request times
   its signature's factor). It must make sense against a /dev/shm the job already had
   (``ran_short``): a tool's suggestion (``LogSize.hint``) at or below that plus the policy's
   headroom is a hint capped by what the tool found; a stated size at or below it says
   nothing more; either way the slots below decide and the basis says why not the log's.
4. ``request``: an allocation that failed (``Need``: bytes and where). It is a lower bound:
   whatever decides, the size ends above it (the request plus headroom, rounded, when the
   chosen size is at or below it); ``source`` is then ``request``.
5. ``model`` and 6. ``measured``: the DataLoader model's predicted peak (from parameters, or
   for a loader observed in a run) and a measured peak (a run's, a probed minimum, a
   Prometheus window's). **They combine before headroom**: ``need = max(model, measured)``,
   then the policy's headroom, then rounding, then one more step when the need would be
   >= 80% of the size (:func:`~shmguard.estimate.policy.shm_size_for`,
   :data:`~shmguard.estimate.policy.ALERT_PERCENT`). ``source`` is ``model`` when the model's
   peak is the larger (ties: ``model``). ``need_floor`` (a configured need) raises that size.
7. ``ran_short``: a /dev/shm size (or free space) that ran out or nearly: twice it, when that
   is more than the starting point (:func:`~shmguard.estimate.policy.default_shm_size`). Also
   a lower bound for every slot below ``configured``: the answer is never at or below it.
8. ``documented``: a size a failure signature or a workload class documents (a vendor's
   stated need), with the least that usually helps (``Documented.floor``, raising every slot
   from 3 on).
9. ``default``: the policy's default (1 GiB), capped by what ``memory_limit`` leaves after
   the policy's margin (:func:`~shmguard.estimate.policy.default_shm_size`).

"No room": for slots 3-9 (a need or a starting point; the flag and a configured size are taken
as given), when ``memory_limit`` leaves no room for the size beside the policy's margin,
``Sized.memory_limit`` is the limit to raise to
(:func:`~shmguard.estimate.policy.memory_limit_for` of the limit and ``current``) and
``Sized.bytes`` the size to ship with it; a caller that cannot raise the limit gives no size.
The default is capped by the limit first, so it has no room only when the cap leaves no more
than ``current``; a need is never cut to fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shmguard.estimate.policy import (
    Policy,
    Sized,
    clean_size,
    default_shm_size,
    memory_limit_for,
    shm_size_for,
)
from shmguard.units import SizeError, format_iec, parse_size_annotation, shown_size_text


@dataclass(frozen=True)
class Need:
    """A figure in bytes and what it is, as the basis sentence names it.

    Attributes:
        bytes: the figure (> 0 to count).
        what: its name before the figure: ``measured peak``, ``predicted peak``,
            ``requested at line 3`` (for a request: the words after the figure).
        context: a sentence put before the basis (how the figure was found: the DataLoader
            model for an observed loader), or empty.
    """

    bytes: int
    what: str
    context: str = ""


@dataclass(frozen=True)
class LogSize:
    """A size a log gives, and how it was read.

    Attributes:
        bytes: the size.
        basis: how it was read, e.g. ``the size the log itself suggests (12.34 GiB, line 3)``.
        hint: a tool's own suggestion (it must exceed what the job had plus the headroom to
            count); False: a stated size, e.g. a request times a factor (it must exceed what
            the job had).
    """

    bytes: int
    basis: str
    hint: bool = True


@dataclass(frozen=True)
class RanShort:
    """A /dev/shm that ran out (or nearly): its size or free space in bytes.

    Attributes:
        bytes: the size (or free space) it had.
        shown: how the basis names it after "twice": default ``the <size> that ran short``;
            ``the /dev/shm size the log shows (2 GiB, line 3)``.
        had: how the basis names it after "more than": default as ``shown``;
            ``the 2 GiB /dev/shm size the job already had (line 3)``.
    """

    bytes: int
    shown: str = ""
    had: str = ""

    def shown_text(self) -> str:
        """:attr:`shown`, or its default."""
        return self.shown or f"the {format_iec(self.bytes)} that ran short"

    def had_text(self) -> str:
        """:attr:`had`, or its default."""
        return self.had or self.shown_text()


@dataclass(frozen=True)
class Documented:
    """A size a failure signature or workload class documents.

    Attributes:
        bytes: the starting point it gives.
        basis: why, one sentence (the signature's ``basis``).
        floor: the least that usually helps (bytes, 0 for none).
    """

    bytes: int
    basis: str
    floor: int = 0


@dataclass(frozen=True)
class ShmEvidence:
    """Everything that can decide a /dev/shm size; every slot is optional (module docstring:
    the precedence). Sizes are int bytes.

    Attributes:
        flag: ``--shm-size`` (taken as given), and ``flag_basis`` its sentence.
        configured: ``(name, text)`` of an annotation or configured size (text parsed with
            :func:`~shmguard.units.parse_size_annotation`), or ``(name, bytes)``.
        log: a size the log states or suggests.
        request: an allocation that failed: a lower bound.
        model: the DataLoader model's predicted peak.
        measured: a measured peak (or probed minimum).
        need_floor: a least size the need's size is raised to (after headroom).
        ran_short: a /dev/shm that ran out or nearly.
        documented: a size a signature or workload class documents.
        memory_limit: the memory limit in force, for the default's cap and "no room".
        current: the /dev/shm there now (the default never proposes it or less).
    """

    flag: int | None = None
    flag_basis: str = "the size given with --shm-size"
    configured: tuple[str, str | int] | None = None
    log: LogSize | None = None
    request: Need | None = None
    model: Need | None = None
    measured: Need | None = None
    need_floor: Need | None = None
    ran_short: RanShort | None = None
    documented: Documented | None = None
    memory_limit: int | None = None
    current: int | None = None


def _configured(name: str, value: str | int) -> tuple[int | None, str]:
    """Bytes of a configured size, or None and the problem."""
    if isinstance(value, int):
        n, text = value, str(value)
    else:
        text = value
        try:
            n = parse_size_annotation(value)
        except SizeError as err:
            return None, f"{name}={shown_size_text(text)} ignored: {err}"
    if n <= 0:
        return None, f"{name}={text!r} ignored: a size must be > 0"
    return n, ""


def _need(ev: ShmEvidence, policy: Policy) -> Sized | None:
    """Slots 5 and 6: the larger of the model's and the measured peak, then headroom."""
    figures = [f for f in (ev.model, ev.measured) if f is not None and f.bytes > 0]
    if not figures:
        return None
    larger = max(figures, key=lambda f: f.bytes)  # the model first: it wins a tie
    source = "model" if larger is ev.model else "measured"
    what = larger.what
    if len(figures) == 2:
        other = figures[1] if larger is figures[0] else figures[0]
        what = f"the larger of {other.what} {format_iec(other.bytes)} and {larger.what}"
    floor = ev.need_floor if ev.need_floor is not None and ev.need_floor.bytes > 0 else None
    sized = shm_size_for(
        larger.bytes,
        policy,
        floor=floor.bytes if floor else None,
        floor_basis=floor.what if floor else "",
        what=what,
        source=source,
    )
    context = "; ".join(f.context for f in figures if f.context)
    return replace(sized, basis=f"{context}; {sized.basis}") if context else sized


def _log_taken(ev: ShmEvidence, policy: Policy) -> bool:
    """Slot 3: whether the log's size counts against the /dev/shm the job already had."""
    log, had = ev.log, ev.ran_short
    if log is None:
        return False
    return had is None or log.bytes > had.bytes * ((1 + policy.headroom) if log.hint else 1.0)


def _not_log(log: LogSize, had: RanShort, policy: Policy) -> str:
    """Why a log's size did not count (it is within what the job already had)."""
    if log.hint:
        return (
            f"; not {log.basis}: that is within {policy.headroom:.0%} of the "
            f"{format_iec(had.bytes)} the job already had, a tool's hint capped by what it found"
        )
    return (
        f"; not {log.basis.replace(', rounded up', '')}: that is no more than the "
        f"{format_iec(had.bytes)} the job already had"
    )


def _start(ev: ShmEvidence, policy: Policy) -> tuple[int, str, str]:
    """Slots 7-9: twice the /dev/shm that ran short, a documented size or the default
    (before the floors): bytes, basis, source."""
    had, doc = ev.ran_short, ev.documented
    n: int
    if had is not None and doc is not None:
        ruled = replace(policy, default_shm_size=doc.bytes)
        n = default_shm_size(ruled, too_small=had.bytes).bytes
        if 2 * had.bytes >= doc.bytes:
            basis, source = f"twice {had.shown_text()}", "ran-short"
        else:
            n = doc.bytes
            basis = f"the usual starting point, more than twice {had.shown_text()}: {doc.basis}"
            source = "documented"
    elif had is not None or doc is None:
        sized = default_shm_size(
            policy,
            memory_limit=ev.memory_limit,
            too_small=had.bytes if had else None,
            current=ev.current,
        )
        n, basis, source = sized.bytes, sized.basis, sized.source
        if had is not None and sized.source == "ran-short":
            basis = f"twice {had.shown_text()}"
    else:
        n, basis, source = doc.bytes, f"a starting point: {doc.basis}", "documented"
    return n, basis, source


def choose_shm(evidence: ShmEvidence, policy: Policy | None = None) -> Sized:
    """The /dev/shm size for ``evidence`` under ``policy`` (default :class:`Policy`): the
    first slot that gives one in the module docstring's precedence, with the lower bounds
    (a /dev/shm that ran short, a failed request, a documented floor) applied.

    Returns:
        a :class:`~shmguard.estimate.policy.Sized` with ``source``, ``basis``, ``problems``
        (configured text that was skipped) and, for a size that does not fit under
        ``evidence.memory_limit`` beside the margin, the ``memory_limit`` to raise to.
    """
    pol = policy or Policy()
    ev = evidence
    if ev.flag is not None:
        return Sized(ev.flag, ev.flag_basis, "flag")
    problems: list[str] = []
    if ev.configured is not None:
        name, value = ev.configured
        n, problem = _configured(name, value)
        if n is not None:
            return Sized(n, f"{name}={value}", "configured")
        problems.append(problem)
    need = _need(ev, pol)
    if ev.log is not None and _log_taken(ev, pol):
        n, basis, source = ev.log.bytes, ev.log.basis, "log"
    elif need is not None:
        n, basis, source = need.bytes, need.basis, need.source
    else:
        n, basis, source = _start(ev, pol)
    if ev.log is not None and ev.ran_short is not None and source != "log":
        basis += _not_log(ev.log, ev.ran_short, pol)
    doc = ev.documented
    if doc is not None and n < doc.floor:
        n = doc.floor
        basis += f"; raised to {format_iec(doc.floor)}, the least that usually helps here"
    n = clean_size(n)
    had = ev.ran_short
    if had is not None and n <= had.bytes:
        ruled = replace(pol, default_shm_size=doc.bytes) if doc else pol
        n = default_shm_size(ruled, too_small=had.bytes).bytes
        basis += f"; raised to {format_iec(n)}: more than {had.had_text()}"
        source = "ran-short"
    req = ev.request
    if req is not None and req.bytes > 0 and n <= req.bytes:
        n = shm_size_for(req.bytes, pol, floor=doc.floor if doc else None).bytes
        basis += f"; raised to {format_iec(n)}: the {format_iec(req.bytes)} {req.what} plus "
        basis += f"{pol.headroom:.0%}"
        source = "request"
    # Every size from here on (a need or a starting point) is checked against the limit:
    # tmpfs pages are charged to the memory cgroup, so a size the limit cannot hold beside
    # the margin gets the job OOM-killed. The flag and a configured size returned above.
    raise_to: int | None = None
    if ev.memory_limit is not None and n + pol.memory_margin > ev.memory_limit:
        raise_to = memory_limit_for(
            n, pol, current_limit=ev.memory_limit, current_shm=ev.current or 0
        )
    return Sized(n, basis, source, tuple(problems), raise_to)

"""Value types of the triage catalogue and of a diagnosis (frozen dataclasses).

A :class:`Signature` is one known failure, loaded from a TOML file (docs/signatures.md lists
them); its :class:`Pattern` objects are the wording variants. Matching a log produces
:class:`Evidence` lines, aggregated into one :class:`Result` per signature, ranked in a
:class:`Diagnosis`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from shmguard.estimate.policy import Sized
from shmguard.model.finding import Applicability, Finding, Fix, Location, Severity
from shmguard.model.fix import PLATFORMS, Change

#: Confidence levels, weakest first. ``high``: the log names the cause; ``medium``: the usual
#: cause of what the log shows; ``low``: possible, other evidence must decide.
CONFIDENCES = ("low", "medium", "high")
#: What a signature is for: a ``cause`` of a failure, ``info`` (true but not a cause by
#: itself) or ``context`` (only contributes facts such as the runtime or the /dev/shm size).
ROLES = ("cause", "info", "context")
#: The kind of fix: ``shm-size`` (a bigger /dev/shm, printed through the snippet renderer),
#: ``config`` (the shm setting is written or placed wrong), ``memory`` (the memory limit),
#: ``fd-limit`` (open files), ``app`` (application-side change), ``investigate`` (capture
#: more before changing anything), ``none``.
REMEDIES = ("shm-size", "config", "memory", "fd-limit", "app", "investigate", "none")
#: Runtimes with a /dev/shm setting a snippet can write (:data:`shmguard.model.fix.RUNTIMES`);
#: ``app`` (a ``--runtime`` value, never inferred) means "only application-side changes".
RUNTIMES = ("docker", "compose", "kubernetes", "podman", "ecs")
#: Every runtime a log can point to: :data:`RUNTIMES` and the platforms whose fix is a sentence
#: (:data:`shmguard.model.fix.PLATFORMS`: Slurm, Apptainer, SageMaker, AzureML, Databricks,
#: Colab).
LOG_RUNTIMES = RUNTIMES + PLATFORMS
#: Units a capture group can be read in (see :mod:`shmguard.triage.matchers`).
UNITS = ("bytes", "df", "k8s", "docker", "size", "tmpfs", "gb", "kib", "text")
#: Capture names with a meaning to the diagnosis; other names are kept as plain text.
FACT_CAPTURES = ("shm_total", "shm_need", "shm_avail", "mem_limit", "shm_suggested")


def confidence_rank(level: str) -> int:
    """0 for low, 1 for medium, 2 for high."""
    return CONFIDENCES.index(level)


@dataclass(frozen=True)
class Pattern:
    """One wording variant: a literal that every match contains (the cheap pre-filter) and a
    regular expression run only on lines that contain the literal.

    ``after``/``within``: the match counts only if the marker pattern ``after`` (same
    signature) matched at most ``within`` lines earlier in the same input. A ``marker``
    pattern is never evidence by itself.
    """

    name: str
    literal: bytes
    regex: re.Pattern[str]
    variant: str = ""
    confidence: str | None = None
    note: str = ""
    runtime: str | None = None
    after: str | None = None
    within: int = 0
    marker: bool = False
    units: tuple[tuple[str, str], ...] = ()


#: Signature kinds whose need the DataLoader model predicts: their size comes from the loader
#: the log shows, else from the sizing policy's default, never from a size the signature file
#: documents, so their ``[size]`` tables carry no ``default`` or ``floor``
#: (:mod:`shmguard.triage.fixes`, rules 4 and 6).
MODELLED_KINDS = ("dataloader_shm",)


@dataclass(frozen=True)
class SizeRule:
    """How to choose a /dev/shm size for this failure (bytes). ``need_factor`` multiplies a
    size the log says was requested; ``basis`` says where ``default`` comes from.
    ``default`` and ``floor`` are None for a kind of :data:`MODELLED_KINDS` (the DataLoader
    model or the sizing policy decides) and set for every other kind.
    ``runtimes``: the runtimes whose size snippet is the fix (empty: all); for the others
    the per-runtime sentence is the fix, because a snippet would repeat the rejected
    setting (``podman run --shm-size`` with ``--ipc=host``). ``when``: signature ids of which
    one must also have matched for a size to be given (the evidence that /dev/shm is the
    file system in question; empty: always); without it the fix and ``decide`` say what to
    check instead."""

    default: int | None
    floor: int | None
    need_factor: float | None
    basis: str
    runtimes: tuple[str, ...] = ()
    when: tuple[str, ...] = ()


@dataclass(frozen=True)
class FixSpec:
    """The fix as data: one-sentence summary, per-runtime sentences, application-side steps
    and what to check next."""

    summary: str
    runtimes: tuple[tuple[str, str], ...] = ()
    app: tuple[str, ...] = ()
    next: tuple[str, ...] = ()


@dataclass(frozen=True)
class Boost:
    """Raise the confidence to ``confidence`` when any signature in ``when`` also matched."""

    when: tuple[str, ...]
    confidence: str


@dataclass(frozen=True)
class Signature:
    """One known failure. ``kind`` is its class (``dataloader_shm``, ``cgroup_oom``...),
    ``also`` the other classes the same evidence is consistent with (ambiguous signatures
    list every candidate). ``explained_by``: more specific signatures that, when they match,
    make this one a consequence rather than a cause. ``source`` is the file it came from.
    ``host_shm``: a match means the container uses the host's IPC namespace, so /dev/shm is
    the host's and runtime size settings (``--shm-size``, ``shm_size``) do not apply.

    What a match says of a measured or guarded run (:mod:`shmguard.measure.outcome`, the
    PyTorch guard), causes only: ``shm``, the cause is a shared memory allocation that failed
    for want of /dev/shm space (the run's outcome is "/dev/shm too small"); ``sigbus``, of
    the SIGBUS path (a page tmpfs could not back was touched: outcome ``sigbus``);
    ``state_only``, a /dev/shm *state* (a ``df`` row at 95%), not a failed allocation: it
    decides only when the run's own sampler saw /dev/shm fill up (needs ``shm``)."""

    id: str
    title: str
    kind: str
    role: str
    confidence: str
    remedy: str
    cause: str
    patterns: tuple[Pattern, ...]
    source: str
    also: tuple[str, ...] = ()
    decide: str = ""
    runtime: str | None = None
    explained_by: tuple[str, ...] = ()
    boosts: tuple[Boost, ...] = ()
    references: tuple[str, ...] = ()
    size: SizeRule | None = None
    fix: FixSpec | None = None
    priority: int = 50
    host_shm: bool = False
    shm: bool = False
    sigbus: bool = False
    state_only: bool = False


@dataclass(frozen=True)
class Evidence:
    """A matching line: input name, 1-based line number, the (cleaned, shortened) text, the
    pattern that matched and its named captures."""

    file: str
    line: int
    text: str
    pattern: str
    captures: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FixPlan:
    """The fix printed for one result: for ``runtime`` (None when unknown or only hinted at,
    ``app`` for application-side only, a platform of :data:`~shmguard.model.fix.PLATFORMS`
    for a size and a sentence without a snippet), a size, the fix values (``changes``: shm
    size and memory limit for the runtimes they apply to, in the order the snippets are
    shown), sentences and steps."""

    summary: str
    runtime: str | None
    shm_size: Sized | None
    memory_limit: int | None
    changes: tuple[Change, ...]
    runtime_notes: tuple[str, ...]
    app: tuple[str, ...]
    next: tuple[str, ...]


@dataclass(frozen=True)
class Result:
    """One matched signature in a diagnosis. ``confidence`` is after boosts and after
    demotion (an explained result is ``low``); ``base_confidence`` before demotion."""

    id: str
    title: str
    kind: str
    also: tuple[str, ...]
    role: str
    remedy: str
    confidence: str
    base_confidence: str
    explained_by: str | None
    cause: str
    decide: str
    notes: tuple[str, ...]
    matches: int
    evidence: tuple[Evidence, ...]
    references: tuple[str, ...]
    fix: FixPlan | None = None

    def to_finding(self) -> Finding:
        """This result as the shared :class:`~shmguard.model.Finding` every command emits:
        ``code`` is the signature id, ``name`` its kind; a cause of high confidence is an
        error, of medium a warning, anything else info; the location is the first evidence
        line; the fix keeps its values (never applied: it is display-only)."""
        if self.role == "cause" and self.explained_by is None:
            severity = {"high": Severity.ERROR, "medium": Severity.WARNING}.get(
                self.confidence, Severity.INFO
            )
        else:
            severity = Severity.INFO
        first = self.evidence[0] if self.evidence else None
        location = Location(file=first.file, line=first.line) if first else None
        fix = None
        if self.fix is not None:
            method = self.fix.shm_size.basis if self.fix.shm_size else ""
            fix = Fix(
                self.fix.summary,
                " ".join((method, *self.fix.runtime_notes, *self.fix.app)).strip(),
                self.fix.changes,
                applicability=Applicability.DISPLAY_ONLY,
            )
        return Finding(self.id, self.kind, severity, self.title, self.cause, location, fix)


@dataclass(frozen=True)
class InputSummary:
    """What was read from one input: bytes, lines, and whether it looked binary."""

    name: str
    bytes: int
    lines: int
    binary: bool


@dataclass(frozen=True)
class Fact:
    """A number the log itself gave (bytes), with where it was seen."""

    name: str
    bytes: int
    file: str
    line: int
    text: str


@dataclass(frozen=True)
class Sequence:
    """Which of two results came first in the same input, and what that order means."""

    first: str
    first_line: int
    then: str
    then_line: int
    file: str
    meaning: str


@dataclass(frozen=True)
class Diagnosis:
    """Everything ``explain`` found. ``results`` are ranked, causes first; ``exit_code`` is 1
    when a cause of medium confidence or more matched, else 0.

    ``runtime`` is one of :data:`LOG_RUNTIMES` (or ``app`` from ``--runtime``), None when
    unknown; ``runtime_source`` is ``flag`` or ``log``; for ``log``, ``runtime_evidence``
    holds the lines that show it (the strongest kinds of marker first, at most 3) and
    ``runtime_confidence`` how sure that is (``low``: only a hint, such as a container-ID
    hostname; the fixes then cover the other runtimes too, this one first).
    """

    inputs: tuple[InputSummary, ...]
    runtime: str | None
    runtime_source: str | None
    runtime_confidence: str | None
    runtime_evidence: tuple[Evidence, ...]
    facts: tuple[Fact, ...]
    results: tuple[Result, ...]
    sequence: tuple[Sequence, ...]
    next_steps: tuple[str, ...]
    exit_code: int
    signatures_loaded: int = 0
    notes: tuple[str, ...] = field(default=())

    def findings(self) -> tuple[Finding, ...]:
        """Every result as a shared :class:`~shmguard.model.Finding`, in rank order."""
        return tuple(r.to_finding() for r in self.results)

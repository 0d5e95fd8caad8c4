"""Which runtime ran the job, read from the log's own markers, with the lines that show it.

Every pattern that names a runtime (``runtime =`` on the pattern or on its signature: the
``context-runtime-*`` signatures hold the markers, and a few failure signatures name theirs,
such as a kubelet eviction message) is one *kind* of marker. A kind counts once however many
lines repeat it (a Compose prefix on every line is one kind, not a thousand votes), weighted
by its confidence: high 4, medium 2, low 1. The runtime with the largest sum wins; on a tie
the more specific one (:data:`ORDER`: Compose before Docker, a container runtime before the
scheduler or platform around it). Its confidence is that of its strongest kind, so a runtime
known only from a hint (a container-ID hostname) stays ``low``.

Typical use (:func:`shmguard.triage.classify.diagnose` does this)::

    guess = infer_runtime(matcher.tallies.values(), flag=None)
    guess.name, guess.confidence, guess.evidence[0].line
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shmguard.triage.matchers import RuntimeMark, Tally
from shmguard.triage.model import CONFIDENCES, Evidence

#: Weight of one kind of marker by its confidence.
WEIGHTS = {"low": 1, "medium": 2, "high": 4}
#: Preference on a tie, the more specific first: the tool that wrote the configuration before
#: the engine under it (Compose before Docker), a container runtime before the scheduler or
#: platform around it (Docker before Slurm).
ORDER = (
    "compose",
    "podman",
    "kubernetes",
    "ecs",
    "docker",
    "apptainer",
    "sagemaker",
    "azureml",
    "databricks",
    "colab",
    "slurm",
)
#: Evidence lines kept for the chosen runtime.
KEEP = 3


@dataclass(frozen=True)
class RuntimeGuess:
    """The runtime of a diagnosis.

    Attributes:
        name: a runtime of :data:`shmguard.triage.model.LOG_RUNTIMES`, ``app`` (only from
            ``--runtime``), or None when neither the flag nor the log says.
        source: ``flag``, ``log`` or None.
        confidence: for ``log``, the confidence of the strongest kind of marker (``low``,
            ``medium``, ``high``); None otherwise.
        evidence: for ``log``, up to :data:`KEEP` lines, one per kind of marker, strongest
            kind first, then in log order.
        score: the weighted sum that won (0 without log evidence).
    """

    name: str | None
    source: str | None
    confidence: str | None
    evidence: tuple[Evidence, ...]
    score: int = 0


def infer_runtime(tallies: Iterable[Tally], flag: str | None = None) -> RuntimeGuess:
    """The runtime ``flag`` names, else the one the log's markers point to (module docstring).

    Args:
        tallies: what each signature matched (:attr:`~shmguard.triage.matchers.Matcher.tallies`
            values).
        flag: ``--runtime``, or None to read the log.
    """
    if flag is not None:
        return RuntimeGuess(flag, "flag", None, ())
    marks: dict[str, list[RuntimeMark]] = {}
    for t in tallies:
        for mark in t.runtime_marks.values():
            marks.setdefault(mark.runtime, []).append(mark)
    if not marks:
        return RuntimeGuess(None, None, None, ())
    scores = {rt: sum(WEIGHTS[m.confidence] for m in ms) for rt, ms in marks.items()}
    best = max(scores.values())
    name = next(rt for rt in (*ORDER, *sorted(scores)) if scores.get(rt) == best)
    chosen = sorted(marks[name], key=lambda m: (-WEIGHTS[m.confidence], m.where))
    evidence: list[Evidence] = []
    seen: set[tuple[str, int]] = set()
    for m in chosen:
        key = (m.evidence.file, m.evidence.line)
        if key not in seen:
            seen.add(key)
            evidence.append(m.evidence)
    top = max(CONFIDENCES.index(m.confidence) for m in chosen)
    return RuntimeGuess(name, "log", CONFIDENCES[top], tuple(evidence[:KEEP]), best)

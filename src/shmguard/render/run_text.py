"""``shmguard run`` as text, on stderr (the command's stdout stays its own): the doctor banner or
its one-line form, the message of an unmet ``--require``, and with ``--watch`` the report of a
stall or a failure, whose diagnosis is the ``explain`` rendering."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shmguard.fix.snippets import fix_snippets
from shmguard.lint.doctor import DoctorReport
from shmguard.measure.watched import StallReport, WatchResult
from shmguard.model import FailOn, Finding
from shmguard.model.host import HostFacts
from shmguard.render.doctor_text import brief_parts
from shmguard.render.escape import printable
from shmguard.render.explain_text import render as render_diagnosis
from shmguard.render.parts import Part, print_parts
from shmguard.units import format_iec

if TYPE_CHECKING:
    from rich.console import Console

#: The ENV rule an unmet --require raises (lint/env/env002_shm_free_below_require.py).
REQUIRE_CODE = "ENV002"
#: Where the runtime of a ``--watch`` diagnosis comes from (doctor's detection).
_DETECTED = "the container shmguard runs in, as doctor detects it"


def command_text(argv: Sequence[str], width: int = 80) -> str:
    """The command as a shell would quote it (control characters escaped: render/escape.py),
    cut to ``width`` characters."""
    text = printable(shlex.join(argv))
    return text if len(text) <= width else text[: width - 1] + "…"


def require_met(report: DoctorReport, require: int | None) -> bool:
    """Whether ``--require`` is met: no ENV002 finding and a /dev/shm that exists. Free space
    that cannot be known (a ``size=0`` tmpfs or ramfs: no limit) counts as met."""
    if require is None:
        return True
    if report.facts.shm.exists.value is False:
        return False
    return not any(f.code == REQUIRE_CODE for f in report.findings)


def _verdict(findings: Sequence[Finding]) -> str:
    if not findings:
        return "ok"
    return ", ".join(f"{f.severity.value} {f.code}" for f in findings)


def _shm(facts: HostFacts) -> str:
    shm = facts.shm
    if shm.exists.value is False:
        return "/dev/shm missing"
    if shm.total.value is None:
        return f"/dev/shm size unknown ({shm.total.reason or 'no limit'})"
    free = shm.free.value
    room = f"{format_iec(free)} free" if free is not None else "free unknown"
    return f"/dev/shm {format_iec(shm.total.value)}, {room}"


def brief_line(report: DoctorReport, require: int | None) -> str:
    """``--brief``: one line with /dev/shm's size and free space, the runtime and the verdict
    (the findings, most severe first), and whether ``--require`` is met."""
    parts = [
        _shm(report.facts),
        f"runtime {report.facts.runtime.name}",
        f"verdict: {_verdict(report.findings)}",
    ]
    if require is not None:
        met = "met" if require_met(report, require) else "NOT MET"
        parts.append(f"--require {format_iec(require)}: {met}")
    return "shmguard run: " + printable(" · ".join(parts))


def banner_parts(report: DoctorReport, require: int | None) -> list[Part]:
    """The doctor banner (:func:`~shmguard.render.doctor_text.brief_parts`), its summary
    saying what ``run`` does next instead of doctor's exit status."""
    if require is None:
        what = "starting the command"
    elif require_met(report, require):
        free = report.facts.shm.free.value
        room = f" ({format_iec(free)} free)" if free is not None else ""
        what = f"--require {format_iec(require)} met{room}: starting the command"
    else:
        what = f"--require {format_iec(require)} NOT met: not starting the command"
    return brief_parts(report, FailOn.ERROR, 0, summary=what)


def require_failure_parts(
    report: DoctorReport, require: int, argv: Sequence[str], *, snippets: bool
) -> list[Part]:
    """The message of an unmet ``--require``: what is required, what there is, and (with
    ``snippets``, for ``--brief``, whose one line has none) the fix with every snippet of the
    detected runtime."""
    from rich.text import Text

    finding = next((f for f in report.findings if f.code == REQUIRE_CODE), None)
    if finding is None:  # /dev/shm is missing: ENV008's message and fix say so
        finding = next((f for f in report.findings if f.fix is not None), None)
        have = "/dev/shm does not exist"
    else:
        have = printable(finding.message)
    head = Text(
        f"shmguard run: --require {format_iec(require)} not met: {have}; "
        f"not starting {command_text(argv)}",
        style="bold red",
    )
    parts: list[Part] = [(head, True)]
    if snippets and finding is not None and finding.fix is not None:
        parts.append((Text("fix: " + printable(finding.fix.description)), True))
        for s in fix_snippets(finding.fix):
            parts.append((Text(f"  # {s.title}", style="dim"), False))
            parts.append((Text("  " + s.text.replace("\n", "\n  "), style="green"), True))
    return parts


def _shm_state_line(result: WatchResult) -> str:
    shm = result.shm
    if shm is None:
        return f"/dev/shm: not sampled ({printable(result.sampler_error or 'no sampler')})"
    pct = f" ({100 * shm.peak / shm.total:.0f}%)" if shm.total else ""
    line = (
        f"/dev/shm: peak {format_iec(shm.peak)} of {format_iec(shm.total)}{pct}, "
        f"{format_iec(shm.used)} used at the end"
    )
    if shm.failed_blocks:
        line += f", {shm.failed_blocks} failed torch allocation(s) (zero-block torch_* files)"
    if result.timeline is not None:
        line += f"; sampled every {result.timeline.interval * 1000:g} ms"
    return line


def print_stall(console: Console, report: StallReport, argv: Sequence[str], grace: float) -> None:
    """The stall report, printed before the command is stopped."""
    from rich.text import Text

    console.print(
        Text(
            f"shmguard run: {command_text(argv)} stalled on a full /dev/shm; stopping it "
            f"(SIGTERM, SIGKILL after {grace:g} s)",
            style="bold red",
        ),
        soft_wrap=True,
    )
    console.print(Text(f"evidence: {printable(report.verdict.reason)}"), soft_wrap=True)
    render_diagnosis(report.diagnosis, console, show_exit=False, runtime_from=_DETECTED)


def print_end(console: Console, result: WatchResult) -> None:
    """How a watched command ended, when it failed: its status, what the sampler saw, the
    outcome, and the diagnosis when the classifier found a cause or the outcome is about
    /dev/shm. Nothing for a success, nor for a command that ended as asked by a forwarded
    stop signal with no /dev/shm cause."""
    from rich.text import Text

    child = result.child
    cmd = command_text(result.command)
    if not result.failed:
        return
    if child.exec_error is not None:
        console.print(Text(f"shmguard: error: {printable(child.exec_error)}"), soft_wrap=True)
        return
    cause, diagnosis = result.cause, result.diagnosis
    shm_cause = cause is not None and cause.outcome.shm_related
    found = diagnosis is not None and diagnosis.exit_code == 1
    if result.stall is not None:
        how = f"by {child.signal_name}" if child.signal_name else f"with status {child.exit_status}"
        console.print(
            Text(
                f"shmguard run: stopped {cmd} (stalled on a full /dev/shm); it ended {how}; "
                f"exit {result.exit_status}",
                style="bold",
            ),
            soft_wrap=True,
        )
        console.print(Text(_shm_state_line(result)), soft_wrap=True)
        return
    if child.interrupted is not None and not shm_cause and not found:
        return
    how = (
        f"was killed by {child.signal_name} (exit {child.exit_status})"
        if child.signal_name
        else f"exited with status {child.exit_status}"
    )
    lines: list[Part] = [
        (Text(f"shmguard run: {cmd} {how}", style="bold red"), True),
        (Text(_shm_state_line(result)), True),
    ]
    if cause is not None:
        lines.append((Text(f"outcome: {cause.outcome.value}: {printable(cause.summary)}"), True))
        shm = result.shm
        if shm_cause and shm is not None and shm.total and shm.peak < 0.9 * shm.total:
            # classify() reads any SIGBUS as shm; the sampler can say it was not full.
            lines.append(
                (
                    Text(
                        f"note: /dev/shm never came near full in this run (peak "
                        f"{100 * shm.peak / shm.total:.0f}%): the cause may lie elsewhere "
                        "(a truncated memory-mapped file also raises SIGBUS)"
                    ),
                    True,
                )
            )
    print_parts(console, lines)
    if diagnosis is not None and (shm_cause or found):
        render_diagnosis(diagnosis, console, show_exit=False, runtime_from=_DETECTED)
    else:
        console.print(
            Text(
                "No /dev/shm cause found in the output or in what the sampler saw "
                f"(`shmguard explain` knows {diagnosis.signatures_loaded if diagnosis else 0} "
                "failure signatures)."
            ),
            soft_wrap=True,
        )

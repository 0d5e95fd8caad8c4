"""`shmguard explain --per-file`: every file diagnosed on its own, one after the other.

Each file gets its own :class:`~shmguard.triage.model.Diagnosis` from
:func:`shmguard.triage.explain_each` (catalogue loaded once, one file open at a time) and is
rendered as soon as it is read (the JSON array too, item by item), so no file's content and
no earlier diagnosis is kept: per file only its line of the closing summary (name, top
cause, error).

A file that cannot be read (missing, a directory or a device, an open or read error) is a
one-line error on stderr naming it, and the other files are still diagnosed. Exit status,
GNU grep's rule for many files ("Normally the exit status is 0 if a line is selected, 1 if no
lines were selected, and 2 if an error occurred", GNU Grep manual, 2.3 Exit Status,
https://www.gnu.org/software/grep/manual/html_node/Exit-Status.html): 2 when any file could
not be read, else 1 when any file has a cause of medium confidence or more, else 0. So a
script never mistakes a partial answer for a complete one; the output still has every file
that was read. Sections are headed ``==> NAME <==``, as GNU ``head`` and ``tail`` head each
file of several.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

from shmguard.cli._common import EXIT_USAGE, error_line, fail
from shmguard.cli._explain_input import input_problem, read_error

if TYPE_CHECKING:
    from shmguard.estimate.policy import Policy
    from shmguard.render.explain_text import TopCause
    from shmguard.triage.model import Diagnosis, Signature


def explain_per_file(
    names: Sequence[str],
    *,
    catalogue: Sequence[Signature],
    runtime: str | None,
    shm_size: int | None,
    policy: Policy,
    evidence: int,
    json_out: bool,
) -> int:
    """Diagnose and print each of ``names`` (``-``: standard input) on its own; return the exit
    status (see the module docstring). ``runtime`` and ``shm_size`` apply to every file."""
    from shmguard.render.explain_text import top_cause_row
    from shmguard.triage import explain_each
    from shmguard.triage.text import top_cause

    rows: list[tuple[str, TopCause | None, str | None]] = []  # name, top cause, error
    found = False
    reading: list[tuple[str, BinaryIO]] = []  # the input being read, for read errors

    def not_read(name: str, message: str) -> None:
        error_line(message)
        rows.append((name, None, message.removeprefix(f"{name}: ")))

    def streams() -> Iterator[tuple[str, BinaryIO]]:
        for name in names:
            if name == "-":
                reading[:] = [("<stdin>", sys.stdin.buffer)]
                yield "<stdin>", sys.stdin.buffer
                continue
            problem = input_problem(name)
            if problem is None:
                try:
                    f = open(name, "rb")  # noqa: SIM115 - closed right after it is read
                except OSError as err:
                    problem = f"{name}: cannot open: {err.strerror or err}"
            if problem is not None:
                not_read(name, problem)
                continue
            with f:
                reading[:] = [(name, f)]
                yield name, f

    def diagnosed() -> Iterator[tuple[str, Diagnosis]]:
        nonlocal found
        inputs = streams()
        while True:
            try:
                for name, d in explain_each(
                    inputs, signatures=catalogue, runtime=runtime, shm_size=shm_size, policy=policy
                ):
                    rows.append((name, top_cause_row(top_cause(d.results)), None))
                    found = found or d.exit_code == 1
                    yield name, d
                return
            except OSError as err:
                # explain_each stops at a read error; the files after it are still in
                # `inputs`, so start again there (the catalogue is not reloaded).
                not_read(reading[0][0] if reading else "input", read_error(reading, err))

    def status() -> int:
        if any(err is not None for _, _, err in rows):
            return EXIT_USAGE
        return 1 if found else 0

    try:
        if json_out:
            from shmguard.render.json import dumps_streamed
            from shmguard.render.json_bodies import explain_file_body

            def tail() -> dict[str, object]:
                errors = [{"file": n, "error": e} for n, _, e in rows if e is not None]
                return {"errors": errors, "exit_code": status()}

            for piece in dumps_streamed(
                "explain", "files", (explain_file_body(n, d) for n, d in diagnosed()), tail
            ):
                sys.stdout.write(piece)
            sys.stdout.write("\n")
        else:
            from shmguard.cli._common import console
            from shmguard.render.explain_text import (
                render,
                render_file_heading,
                render_per_file_summary,
            )

            con = console()
            sections = 0
            for name, d in diagnosed():
                render_file_heading(name, con, first=sections == 0)
                render(d, con, evidence=evidence, show_exit=False)
                sections += 1
            render_per_file_summary(rows, status(), con, first=sections == 0)
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    return status()

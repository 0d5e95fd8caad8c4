"""`shmguard explain`: read a failure log, print the cause, the evidence and the fix.

Exit status: 1 when a cause of medium confidence or more matched, 0 when none did, 2 on a
usage error (missing file, bad option, bad signature file). With ``--per-file`` every file is
diagnosed on its own (:mod:`shmguard.cli._explain_each`): 1 when any file has such a cause, 2
when any file could not be read. SIGINT or SIGTERM while reading: the diagnosis of what was
read, marked partial, then 128 + the signal. Docs: docs/explain.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_USAGE, console, error_line, fail, size_option
from shmguard.cli._config import settings
from shmguard.cli._explain_input import input_problem, read_error

_RUNTIME_CHOICES = (
    "docker",
    "compose",
    "kubernetes",
    "podman",
    "ecs",
    "slurm",
    "apptainer",
    "sagemaker",
    "azureml",
    "databricks",
    "colab",
    "app",
)
#: Common spellings users type for a runtime.
_RUNTIME_ALIASES = {
    "k8s": "kubernetes",
    "kube": "kubernetes",
    "docker-compose": "compose",
    "singularity": "apptainer",
}


def _check_input(name: str) -> None:
    """Exit 2 unless ``name`` is a regular file or a pipe (:func:`input_problem`)."""
    problem = input_problem(name)
    if problem is not None:
        fail(problem)


@app.command()
def explain(
    files: list[str] = typer.Argument(  # noqa: B008
        None,
        help="Log files to read ('-' or none: standard input). docker logs, kubectl logs, "
        "kubectl describe pod, dmesg/journal, plain stderr; any size. Several files are one "
        "incident (e.g. the logs and the describe output of one pod), unless --per-file.",
        show_default=False,
        metavar="FILE...",
    ),
    runtime: str = typer.Option(
        None,
        "--runtime",
        help="Runtime to print fixes for: docker, compose, kubernetes, podman, ecs; a "
        "platform whose fix is a sentence: slurm, apptainer, sagemaker, azureml, databricks, "
        "colab; or app (application-side only). Default: inferred from the log's own markers, "
        "shown with the lines that show it.",
        show_default=False,
        metavar="RUNTIME",
    ),
    shm_size: str = typer.Option(
        None,
        "--shm-size",
        help="Size to use in the fixes instead of the one shmguard chooses (64m, 2g, 1Gi).",
        show_default=False,
        metavar="SIZE",
    ),
    signatures: list[Path] = typer.Option(  # noqa: B008
        [],
        "--signatures",
        help="A directory of extra signature files (*.toml, the catalogue format); repeatable.",
        show_default=False,
        metavar="DIR",
    ),
    evidence: int = typer.Option(
        3, "--evidence", min=1, max=50, metavar="N", help="Evidence lines per cause (text)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema shmguard.explain/1)."),
    per_file: bool = typer.Option(
        False,
        "--per-file",
        help="Diagnose each file on its own (its own causes, runtime and fix), one after the "
        "other. A file that cannot be read is a one-line error and the others are still "
        "diagnosed; the exit status is then 2.",
    ),
) -> None:
    """Explain a failure log: ranked causes, evidence lines and the fix for your runtime."""
    from shmguard.triage import SignatureError, explain_streams, load_catalogue

    runtime = _RUNTIME_ALIASES.get(runtime.lower(), runtime.lower()) if runtime else runtime
    if runtime is not None and runtime not in _RUNTIME_CHOICES:
        fail(f"--runtime: {runtime!r} is not one of {', '.join(_RUNTIME_CHOICES)}")
    size = size_option(shm_size, "--shm-size")
    names = list(files or [])
    if not names:
        if sys.stdin is None or sys.stdin.isatty():
            fail("no input: give a log file, or pipe a log in ('-' reads standard input)")
        names = ["-"]
    if names.count("-") > 1:
        fail("'-' (standard input) can be given only once")
    if "-" in names and sys.stdin is None:
        fail("-: standard input is closed; give a log file instead")
    if not per_file:
        for name in names:
            if name != "-":
                _check_input(name)

    try:
        conf = settings(None)
        extra = [*conf.signatures, *signatures]
        catalogue = load_catalogue(extra)
    except SignatureError as err:
        fail(str(err))

    if per_file:
        from shmguard.cli._explain_each import explain_per_file

        code = explain_per_file(
            names,
            catalogue=catalogue,
            runtime=runtime,
            shm_size=size,
            policy=conf.policy,
            evidence=evidence,
            json_out=json_out,
        )
        raise typer.Exit(code)

    reading: list[tuple[str, BinaryIO]] = []  # the input being read, for read errors

    def streams() -> Iterator[tuple[str, BinaryIO]]:
        for name in names:
            if name == "-":
                reading[:] = [("<stdin>", sys.stdin.buffer)]
                yield "<stdin>", sys.stdin.buffer
                continue
            try:
                f = open(name, "rb")  # noqa: SIM115 - closed right after it is read
            except OSError as err:
                fail(f"{name}: cannot open: {err.strerror or err}")
            with f:
                reading[:] = [(name, f)]
                yield name, f

    import signal

    stopped: list[int] = []  # the signal that ended the reading (an endless pipe's way out)

    def _stop(sig: int, _frame: object) -> None:
        stopped.append(sig)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    import threading

    main = threading.current_thread() is threading.main_thread()  # handlers: main thread only
    if main:
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
    try:
        diagnosis = explain_streams(
            streams(),
            signatures=catalogue,
            runtime=runtime,
            shm_size=size,
            policy=conf.policy,
            interruptible=True,
        )
    except OSError as err:
        fail(read_error(reading, err))
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    finally:
        if main:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import explain_body

        sys.stdout.write(dumps("explain", explain_body(diagnosis)) + "\n")
    else:
        from shmguard.render.explain_text import render

        render(diagnosis, console(), evidence=evidence)
    if stopped:  # the partial diagnosis is out (marked by its note): 128 + the signal
        error_line(f"interrupted by {signal.Signals(stopped[0]).name}: the diagnosis is partial")
        raise typer.Exit(128 + stopped[0])
    raise typer.Exit(diagnosis.exit_code)


__all__ = ["EXIT_USAGE", "explain"]

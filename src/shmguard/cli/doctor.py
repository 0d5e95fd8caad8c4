"""`shmguard doctor`: check this container's (or another process's) /dev/shm, memory limit and
limits against the ENV rules, and print the fix for the detected runtime.

``--json`` must start fast: nothing heavy is imported at module level and the JSON path never
imports Rich.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from shmguard.cli._app import app
from shmguard.cli._common import fail, size_option
from shmguard.cli._config import ConfigOption, settings
from shmguard.model import FailOn


class Workload(str, enum.Enum):
    """``--workload`` choices."""

    AUTO = "auto"
    ML = "ml"
    CONTAINER = "container"


@app.command()
def doctor(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the shmguard.doctor/1 JSON document.")
    ] = False,
    brief: Annotated[
        bool, typer.Option("--brief", help="One-screen banner instead of the full report.")
    ] = False,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            case_sensitive=False,
            help="Exit 1 when a finding at or above this severity exists "
            "[default: the configuration's fail-on, else error].",
            show_default=False,
        ),
    ] = None,
    require: Annotated[
        str | None,
        typer.Option(
            "--require",
            metavar="SIZE",
            help="Free /dev/shm the job needs (64m, 1g, 512Mi); less is an error (ENV002).",
        ),
    ] = None,
    pid: Annotated[
        int | None,
        typer.Option("--pid", help="Inspect this process's container from the host."),
    ] = None,
    torch: Annotated[
        bool,
        typer.Option("--torch", help="Also import torch for its version and sharing strategy."),
    ] = False,
    workload: Annotated[
        Workload,
        typer.Option(
            "--workload",
            case_sensitive=False,
            help="The workload class whose severities apply: ml (PyTorch, NCCL, inference), "
            "container, or auto (detected from the shm holders, leftover torch files, GPUs).",
        ),
    ] = Workload.AUTO,
    config: ConfigOption = None,
    root: Annotated[
        Path,
        typer.Option(
            "--root",
            help="Read /proc, /sys and /dev/shm under this directory (a host snapshot or "
            "fixture tree; its statvfs.json, if any, stands in for statvfs).",
        ),
    ] = Path("/"),
) -> None:
    """Check /dev/shm, memory limits and ulimits; exit 1 on findings at --fail-on or above."""
    from shmguard.inspect.host import inspect_host
    from shmguard.inspect.shm import StatvfsFn, statvfs_from_json
    from shmguard.lint.doctor import DoctorOptions, diagnose
    from shmguard.model import exit_status
    from shmguard.units import format_iec

    needed = size_option(require, "--require")
    conf = settings(config)
    fail_on = fail_on or conf.fail_on or FailOn.ERROR
    statvfs: StatvfsFn | None = None
    try:
        if not root.is_dir():
            fail(f"--root {root}: not a directory")
        if pid is not None and (pid <= 0 or not (root / "proc" / str(pid)).is_dir()):
            fail(f"--pid {pid}: no such process under {root / 'proc'}")
        if (root / "statvfs.json").is_file() and root.resolve() != Path("/"):
            statvfs = statvfs_from_json(root)
    except OSError as err:  # is_dir() raises for EACCES (e.g. --root /proc/1/root)
        fail(f"--root {root}: {(err.strerror or str(err)).lower()}")
    except ValueError as err:
        fail(str(err))
    facts = inspect_host(root, pid=pid, statvfs=statvfs, torch=torch)
    from shmguard.lint.engine import unknown_codes
    from shmguard.lint.env import RULES

    unknown = unknown_codes(conf, RULES)
    if unknown:
        last = RULES[-1].code
        fail(f"{conf.path}: {', '.join(unknown)}: no such rule (doctor has ENV001-{last})")
    report = diagnose(
        facts,
        DoctorOptions(require=needed, policy=conf.policy),
        config=conf,
        workload=None if workload is Workload.AUTO else workload.value,
    )
    code = exit_status(report.findings, fail_on)
    if json_out:
        from shmguard.render.json import dumps
        from shmguard.render.json_bodies import doctor_body

        body = doctor_body(report, fail_on, code, conf.path)
        sys.stdout.write(dumps("doctor", body) + "\n")
    else:
        from rich.console import Console

        from shmguard.cli._common import console
        from shmguard.render.doctor_text import brief_parts, report_parts
        from shmguard.render.escape import printable
        from shmguard.render.parts import print_parts

        out = console()
        assert isinstance(out, Console)
        print_parts(out, (brief_parts if brief else report_parts)(report, fail_on, code))
        free = facts.shm.free.value
        if needed is not None and free is not None and free >= needed:
            out.print(f"--require {format_iec(needed)}: met ({format_iec(free)} free)")
        if conf.path is not None:
            out.print(f"configuration: {printable(str(conf.path))}", style="dim", soft_wrap=True)
    if code:
        raise typer.Exit(code)

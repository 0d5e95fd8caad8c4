"""``shmguard watch``: /dev/shm live, with a threshold alert and the stall verdict.

Thin: parse arguments, run :class:`shmguard.monitor.watch.Monitor`, render
(:mod:`shmguard.render.watch_text`), exit. Exit status: 0 (``--once`` below the threshold, or
interrupted by SIGINT or SIGTERM), 1 the threshold was crossed (without ``--on-alert``), 2 bad
input or /dev/shm unreadable, 3 stalled: DataLoader blocked on /dev/shm, 141 standard output
was a pipe whose reader went away (``| head``), quietly.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import typer

from shmguard.cli._app import app
from shmguard.cli._common import EXIT_FINDINGS, EXIT_OK, fail
from shmguard.estimate.policy import ALERT_PERCENT

if TYPE_CHECKING:
    from shmguard.monitor.watch import WatchSnapshot

#: Exit status when standard output is a pipe whose reader has gone: 128 + SIGPIPE, what a
#: shell reports for ``yes | head``'s ``yes``.
EXIT_BROKEN_PIPE = 141
#: Exit status of a stall (distinct from 1, the threshold).
EXIT_STALLED = 3


def _fraction(text: str) -> float:
    """``80%`` or ``0.8`` -> 0.8, or exit 2 naming ``--threshold``."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        fail(f"--threshold: not a percentage or fraction: {text!r} (e.g. 80% or 0.8)")
    if not 0 < value <= 1:
        fail(f"--threshold: must be above 0% and at most 100%, got {text!r}")
    return value


def _seconds(text: str, flag: str) -> float:
    from shmguard.units import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as err:
        fail(f"{flag}: {err}")


def _out(line: str) -> None:
    if sys.stdout is not None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _run_alert(cmd: str, kind: str, snap: WatchSnapshot) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with ``sh -c`` and the alert in its environment; not waited for."""
    env = dict(os.environ)
    env.update(
        SHMGUARD_ALERT=kind,
        SHMGUARD_PATH=snap.path,
        SHMGUARD_USED=str(snap.window_peak),
        SHMGUARD_SIZE=str(snap.total),
        SHMGUARD_THRESHOLD=str(snap.threshold),
    )
    return subprocess.Popen(["/bin/sh", "-c", cmd], env=env, stdin=subprocess.DEVNULL)


@app.command()
def watch(
    interval: str = typer.Option(
        "1s", "--interval", metavar="DURATION", help="Refresh period (1s, 500ms, 2)."
    ),
    threshold: str = typer.Option(
        f"{ALERT_PERCENT}%",
        "--threshold",
        metavar="PCT",
        help="Alert when use reaches this share of /dev/shm (80% or 0.8).",
    ),
    pid: int | None = typer.Option(
        None, "--pid", metavar="PID", help="Watch /proc/PID/root/dev/shm and PID's process tree."
    ),
    container_root: str | None = typer.Option(
        None,
        "--container-root",
        metavar="PATH",
        help="Watch PATH/dev/shm (a container's root filesystem).",
    ),
    once: bool = typer.Option(False, "--once", help="Print one snapshot after one interval."),
    json_out: bool = typer.Option(
        False, "--json", help="JSON (shmguard.watch/1): one document, or one line per refresh."
    ),
    on_alert: str | None = typer.Option(
        None,
        "--on-alert",
        metavar="CMD",
        help="Run CMD (sh -c) at each upward crossing of the threshold and keep watching; "
        "also at a stall (then exit 3). Env: SHMGUARD_ALERT (threshold|stalled), "
        "SHMGUARD_USED, _SIZE (bytes), _PATH, _THRESHOLD.",
    ),
    stall_after: str = typer.Option(
        "10s",
        "--stall-after",
        metavar="DURATION",
        help="Near full, failed allocations and no progress for this long: stalled.",
    ),
) -> None:
    """Watch /dev/shm live: size, use, owners, the memory cgroup, a sparkline; alert at the
    threshold; report a DataLoader stalled on a full /dev/shm, with the fix.

    Exit status: 0 below the threshold (--once) or interrupted; 1 threshold crossed (without
    --on-alert); 2 bad input; 3 stalled; 141 output pipe closed (| head).
    """
    from shmguard.monitor.target import TargetError, resolve_target
    from shmguard.monitor.watch import Monitor
    from shmguard.render.json import dumps, envelope
    from shmguard.render.json_bodies import watch_body
    from shmguard.render.watch_text import stall_lines, summary_lines

    period = _seconds(interval, "--interval")
    stall = _seconds(stall_after, "--stall-after")
    share = _fraction(threshold)
    try:
        target = resolve_target(pid, container_root)
    except TargetError as err:
        fail(str(err))
    monitor = Monitor(target, threshold=share, stall_after=stall, poll=min(0.1, period))
    try:
        monitor.__enter__()
    except OSError as err:
        fail(f"{target.shm_path}: {err.strerror or err}")
    import signal

    def _stop(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM (docker stop, kubectl delete, a supervisor) ends the watch as Ctrl-C does; both
    # are unblocked, as a parent that waits for them with sigtimedwait (the sandbox) passes
    # its blocked mask on to what it starts.
    signal.signal(signal.SIGTERM, _stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    children: list[subprocess.Popen[bytes]] = []
    above = False
    status = EXIT_OK
    live = None
    try:
        if not once and not json_out and sys.stdout is not None and sys.stdout.isatty():
            from rich.live import Live

            from shmguard.cli._common import console

            live = Live(console=console(), auto_refresh=False)
            live.__enter__()
        while True:
            time.sleep(period)
            snap = monitor.snapshot()
            children = [c for c in children if c.poll() is None]
            if once:
                _out(
                    dumps("watch", watch_body(snap)) if json_out else "\n".join(summary_lines(snap))
                )
                status = EXIT_STALLED if snap.stalled else EXIT_FINDINGS if snap.alert else EXIT_OK
                break
            if json_out:
                import json

                _out(json.dumps(envelope("watch", watch_body(snap)), ensure_ascii=False))
            elif live is not None:
                from shmguard.render.watch_text import watch_view

                live.update(watch_view(snap), refresh=True)
            else:
                _out(summary_lines(snap)[0])
            if snap.stalled:
                if live is None and not json_out:
                    for line in stall_lines(snap):
                        _out(line)
                if on_alert is not None:
                    children.append(_run_alert(on_alert, "stalled", snap))
                status = EXIT_STALLED
                break
            if snap.alert and not above:
                if on_alert is None:
                    if live is None and not json_out:
                        _out(summary_lines(snap)[-1])
                    status = EXIT_FINDINGS
                    break
                children.append(_run_alert(on_alert, "threshold", snap))
            above = snap.alert
    except KeyboardInterrupt:
        status = EXIT_OK
    except BrokenPipeError:
        # The reader is gone (``| head``): end quietly with the status a shell reports for a
        # tool SIGPIPE ended, never 1 (which says the threshold was crossed).
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the interpreter flushes it at exit)
        status = EXIT_BROKEN_PIPE
    finally:
        if live is not None:
            live.__exit__(None, None, None)
        monitor.__exit__(None, None, None)
        for c in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.wait(timeout=10)
    raise typer.Exit(status)

"""``shmguard exporter``: serve /dev/shm metrics for Prometheus until SIGTERM or SIGINT.

Thin: parse arguments, start :class:`shmguard.monitor.exporter.ExporterServer`, wait for a
signal, shut it down. Exit status: 0 after a signal, 2 for bad input or an address that cannot
be bound.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from shmguard.cli._app import app
from shmguard.cli._common import fail, size_option, stop_on_signal
from shmguard.cli._config import ConfigOption, settings
from shmguard.cli._runopts import _duration


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9808`` for IPv6) -> ``(host, port)``, or exit 2."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen {text}: expected HOST:PORT, such as 127.0.0.1:9808 or [::]:9808")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


@app.command()
def exporter(
    listen: str = typer.Option(
        "127.0.0.1:9808", "--listen", metavar="HOST:PORT", help="Address to serve /metrics on."
    ),
    interval: str | None = typer.Option(
        None,
        "--interval",
        metavar="DURATION",
        help="Sampling interval between scrapes, for the peak (default 100ms; 1s with "
        "--node-root).",
    ),
    shm_path: str = typer.Option(
        "/dev/shm", "--shm-path", metavar="PATH", help="The /dev/shm to watch."
    ),
    pid: int | None = typer.Option(
        None,
        "--pid",
        metavar="PID",
        help="Watch this process's /dev/shm (/proc/PID/root/dev/shm), owners and memory cgroup.",
    ),
    window: str = typer.Option(
        "5m", "--window", metavar="DURATION", help="How far shmguard_shm_peak_bytes looks back."
    ),
    stall_after: str = typer.Option(
        "10s",
        "--stall-after",
        metavar="DURATION",
        help="No progress this long on a full /dev/shm: shmguard_stalled 1.",
    ),
    required: str | None = typer.Option(
        None,
        "--required",
        metavar="SIZE",
        help="The job's /dev/shm need (plan/measure) as shmguard_shm_required_bytes; "
        "default: [exporter] required-shm of the configuration.",
    ),
    node_root: str | None = typer.Option(
        None,
        "--node-root",
        metavar="PATH",
        help="Node mode (a DaemonSet): every pod's shm tmpfs on the node seen below PATH "
        "(/host), named from the kubelet's and the runtime's records.",
    ),
    max_connections: int = typer.Option(
        64,
        "--max-connections",
        metavar="N",
        help="Connections served at once (a thread each); when all are taken, a new one "
        "takes the slot of the oldest that has not sent its request.",
        min=1,
    ),
    request_timeout: str = typer.Option(
        "10s",
        "--request-timeout",
        metavar="DURATION",
        help="Longest a connection may take to send its request, and again to be answered; "
        "slower ones are cut.",
    ),
    config: ConfigOption = None,
) -> None:
    """Serve /dev/shm size, use, trailing peak, owners, stalls and cgroup figures to Prometheus.

    Labels namespace, pod and container come from POD_NAMESPACE, POD_NAME and CONTAINER_NAME
    (Kubernetes downward API). Runs until SIGTERM or SIGINT. See docs/exporter.md.
    """
    from shmguard.monitor.exporter import ExporterOptions, ExporterServer, ShmCollector
    from shmguard.monitor.node_exporter import NodeCollector

    host, port = parse_listen(listen)
    timeout = _duration(request_timeout, "--request-timeout") or 10.0
    if not 0.1 <= timeout <= 300:
        fail(f"--request-timeout {request_timeout}: must be from 100ms to 5m")
    every = _duration(interval, "--interval") or (1.0 if node_root else 0.1)
    if not 0.001 <= every <= 60:
        fail(f"--interval {interval}: must be from 1ms to 60s")
    span = _duration(window, "--window") or 300.0
    if span < 10:
        fail(f"--window {window}: must be at least 10s")
    bucket = min(10.0, span / 10)
    collector: ShmCollector | NodeCollector
    if node_root is not None:
        if pid is not None or shm_path != "/dev/shm":
            fail("--node-root: reads every pod's mounts; it does not go with --pid or --shm-path")
        if not Path(node_root).is_dir():
            fail(f"--node-root {node_root}: not a directory")
        collector = NodeCollector(Path(node_root), interval=every, window=span, bucket=bucket)
        watched = f"the pods below {node_root}"
    else:
        after = _duration(stall_after, "--stall-after") or 10.0
        need = size_option(required, "--required")
        if need is None:
            need = settings(config).required_shm
        if pid is not None and not Path(f"/proc/{pid}").exists():
            fail(f"--pid {pid}: no such process")
        options = ExporterOptions(
            shm_path=shm_path,
            pid=pid,
            interval=every,
            window=span,
            bucket=bucket,
            required=need,
            stall_after=after,
        )
        collector = ShmCollector(options)
        watched = options.path
    collector.start()
    try:
        server = ExporterServer(
            collector, host, port, max_connections=max_connections, timeout=timeout
        )
    except OSError as err:
        collector.close()
        fail(f"--listen {listen}: {err.strerror or err}")
    stop = stop_on_signal()
    shown = f"[{server.host}]" if ":" in server.host else server.host
    if sys.stderr is not None:
        sys.stderr.write(
            f"shmguard exporter: serving http://{shown}:{server.port}/metrics for {watched}\n"
        )
        sys.stderr.flush()
    while not stop.wait(0.5):
        pass
    server.shutdown()

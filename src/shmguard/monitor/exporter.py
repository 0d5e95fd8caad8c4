"""The Prometheus exporter: a custom collector that samples /dev/shm at scrape time.

Why a separate exporter: node_exporter's default mount-point exclusions drop /dev/shm and
kubelet pod volumes, cAdvisor folds shm pages into ``container_memory_cache``, and anything
that lists the directory misses PyTorch's unlinked ``torch_*`` files; only ``statvfs`` sees
them (../shared/research/torch_shm.md, "Monitor: what to sample").

Between scrapes THE sampler (:meth:`shmguard.measure.sampler.ShmSampler.watcher`, in-process:
nothing process-wide changes) polls at ``interval`` and on inotify events; every
``bucket`` seconds a fresh sampler takes over (started before the old one stops, so there is
no gap) and the old one's peak goes into a :class:`~shmguard.monitor.peaks.WindowPeak`. So
memory stays bounded for days and ``shmguard_shm_peak_bytes`` is the maximum over a fixed
trailing window that every scraper sees alike.

The collector never raises out of ``collect``: an unreadable /dev/shm (the pod or the watched
process is gone) gives ``shmguard_up 0`` and the metrics that need it are left out. Metric
names and meanings: docs/exporter.md.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from shmguard._version import __version__
from shmguard.inspect.holders import KINDS, restrict_to_device, scan_holders
from shmguard.measure.sampler import ShmSampler, Timeline
from shmguard.measure.stall import StallObserver, TreeCpu
from shmguard.monitor.peaks import WindowPeak
from shmguard.monitor.shared_scrape import SharedCollect
from shmguard.serving import BUSY, IDLE, ConnectionLimits, parse_request_within
from shmguard.triage.stall import ShmObservation, stall_verdict

#: Environment variables (Kubernetes downward API) -> constant label names.
LABEL_ENV = {"namespace": "POD_NAMESPACE", "pod": "POD_NAME", "container": "CONTAINER_NAME"}
#: Distinct failed-allocation file names remembered for the counter (bounded memory).
MAX_FAILED_NAMES = 10_000
METRICS = (
    "shmguard_shm_size_bytes",
    "shmguard_shm_used_bytes",
    "shmguard_shm_avail_bytes",
    "shmguard_shm_peak_bytes",
    "shmguard_shm_owner_bytes",
    "shmguard_shm_failed_allocations_total",
    "shmguard_stalled",
    "shmguard_cgroup_memory_limit_bytes",
    "shmguard_cgroup_memory_shmem_bytes",
    "shmguard_shm_required_bytes",
    "shmguard_info",
    "shmguard_up",
)
"""Every metric name the exporter can export (counters without their ``_created``)."""


def labels_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The constant labels ``namespace``, ``pod``, ``container`` from :data:`LABEL_ENV`
    (empty strings when unset, which Prometheus treats as an absent label)."""
    env = os.environ if environ is None else environ
    return {label: env.get(var, "") for label, var in LABEL_ENV.items()}


@dataclass(frozen=True)
class ExporterOptions:
    """What the exporter watches and how.

    Attributes:
        shm_path: the /dev/shm to statvfs; with ``pid`` and the default, the process's own
            (``/proc/<pid>/root/dev/shm``).
        pid: attribute owners to this process and its descendants and read its memory
            cgroup; None: owners over every process, our own cgroup.
        interval: seconds between the sampler's polls between scrapes (> 0).
        window: seconds ``shmguard_shm_peak_bytes`` looks back.
        bucket: seconds per peak bucket (and per sampler generation).
        required: bytes of /dev/shm the job needs (``plan``/``measure``), or None.
        stall_after: seconds without progress before a full /dev/shm counts as stalled.
        labels: constant labels on every metric (:func:`labels_from_env`).
    """

    shm_path: str = "/dev/shm"
    pid: int | None = None
    interval: float = 0.1
    window: float = 300.0
    bucket: float = 10.0
    required: int | None = None
    stall_after: float = 10.0
    labels: Mapping[str, str] = field(default_factory=labels_from_env)

    @property
    def path(self) -> str:
        """The statvfs path actually used."""
        if self.pid is not None and self.shm_path == "/dev/shm":
            return f"/proc/{self.pid}/root/dev/shm"
        return self.shm_path


def _last_change(timeline: Timeline, t0: float) -> float | None:
    """Monotonic time of the last change in ``timeline`` (started at ``t0``), or None."""
    last = None
    for (_, a), (t, b) in zip(timeline.samples, timeline.samples[1:], strict=False):
        if a != b:
            last = t0 + t
    return last


class ShmCollector:
    """A prometheus-client custom collector (``collect()`` yields metric families).

    Call :meth:`start` before registering it and :meth:`close` at the end. Scrapes may come
    from several threads at once; state they share is under a lock.

    Args:
        options: what to watch (:class:`ExporterOptions`).
    """

    def __init__(self, options: ExporterOptions) -> None:
        self.options = options
        self.path = options.path
        self.peaks = WindowPeak(options.window, options.bucket)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sampler: ShmSampler | None = None
        self._sampler_t0 = 0.0
        self._thread: threading.Thread | None = None
        self._last_used: int | None = None
        self._last_change = time.monotonic()
        #: the failed-block baseline (taken at start) and the CPU mark (one scrape to the next).
        self._observer = StallObserver(self.path)
        self._cpu = TreeCpu()
        self._failed_seen: set[str] = set()
        self.scrapes = 0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start sampling between scrapes (a missing /dev/shm is retried every bucket)."""
        self._observer.take_baseline()
        self._rotate()
        self._thread = threading.Thread(target=self._keeper, name="shm-exporter", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the sampler and the keeper thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.cancel(wait=2.0)

    def _keeper(self) -> None:
        while not self._stop.wait(self.options.bucket):
            self._rotate()

    def _new_sampler(self) -> ShmSampler | None:
        sampler = ShmSampler.watcher(self.path, interval=self.options.interval)
        try:
            sampler.start()
        except OSError:
            return None
        return sampler

    def _rotate(self) -> None:
        new = self._new_sampler()
        # Taken after start(), which sets the sampler's own "last change" to its start: only a
        # real change afterwards makes since_change() shorter than the time since t0.
        t0 = time.monotonic()
        with self._lock:
            old, old_t0 = self._sampler, self._sampler_t0
            self._sampler, self._sampler_t0 = new, t0
        if old is None:
            return
        timeline = old.stop()
        now = time.monotonic()
        with self._lock:
            self.peaks.add(timeline.peak, now)
            changed = _last_change(timeline, old_t0)
            if changed is not None:
                self._last_change = max(self._last_change, changed)

    # -------------------------------------------------------------------- scrape

    def _process_tree(self) -> list[int] | None:
        if self.options.pid is None:
            return None
        import psutil

        try:
            root = psutil.Process(self.options.pid)
            return [root.pid, *(p.pid for p in root.children(recursive=True))]
        except psutil.Error:
            return []

    def _stalled(self, used: int, total: int, peak: int, pids: list[int] | None) -> bool:
        now = time.monotonic()
        with self._lock:
            self._observer.take_baseline()  # a no-op after start()
        sizes = dict(self._observer.failed())
        with self._lock:
            new_failed = set(sizes)
            # The request that failed did not fit: free space below it counts as near full
            # (a failed allocation frees its partial pages, so a hung job can sit up to one
            # batch below the size; triage/stall.py).
            margin = max((sizes[n] for n in new_failed), default=0)
            for name in new_failed:
                if len(self._failed_seen) < MAX_FAILED_NAMES:
                    self._failed_seen.add(name)
            if used != self._last_used:
                self._last_used, self._last_change = used, now
            sampler = self._sampler
            if sampler is not None and sampler.since_change() < now - self._sampler_t0:
                self._last_change = max(self._last_change, now - sampler.since_change())
            # The tree's CPU time progressing since the last scrape (the stall observer's
            # test, as measure/hang.py judges it) counts as progress.
            if pids and self._observer.cpu_stepped(now, self._cpu.read(pids)):
                self._last_change = now
            quiet = now - self._last_change
        obs = ShmObservation(
            used=used,
            total=total,
            peak=peak,
            margin=margin,
            failed_blocks=len(new_failed),
            quiet=quiet,
            sees_output=False,
        )
        return stall_verdict(obs, self.options.stall_after).stalled

    def _cgroup(self) -> tuple[int | None, int | None]:
        from shmguard.inspect.cgroup import read_cgroup

        def read(path: str) -> str | None:
            try:
                return Path(path).read_text()
            except OSError:
                return None

        proc = f"/proc/{self.options.pid}" if self.options.pid is not None else "/proc/self"
        facts = read_cgroup(Path("/"), read("/proc/self/mountinfo"), read(f"{proc}/cgroup"))
        return facts.memory_limit.value, facts.shmem.value

    def collect(self) -> Iterator[Any]:
        """Sample now and yield the metric families (prometheus-client calls this per
        scrape). Never raises for a vanished /dev/shm or process: ``shmguard_up`` is 0."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        names, values = list(self.options.labels), list(self.options.labels.values())

        def gauge(
            name: str, doc: str, value: float, extra: Mapping[str, str] | None = None
        ) -> GaugeMetricFamily:
            extra = extra or {}
            g = GaugeMetricFamily(name, doc, labels=[*names, *extra])
            g.add_metric([*values, *extra.values()], value)
            return g

        self.scrapes += 1
        yield gauge(
            "shmguard_info",
            "shmguard exporter version and the /dev/shm path it watches",
            1,
            {"version": __version__, "path": self.path},
        )
        try:
            st = os.statvfs(self.path)
            device = os.stat(self.path).st_dev
        except OSError:
            yield gauge("shmguard_up", "1 when /dev/shm could be read at this scrape", 0)
            return
        total = st.f_blocks * st.f_frsize
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        avail = st.f_bavail * st.f_frsize
        with self._lock:
            self.peaks.add(used)
            sampler = self._sampler
            peak = max(self.peaks.peak() or 0, used, sampler.peak if sampler else 0)
        yield gauge("shmguard_up", "1 when /dev/shm could be read at this scrape", 1)
        yield gauge("shmguard_shm_size_bytes", "Size of /dev/shm (statvfs f_blocks)", total)
        yield gauge("shmguard_shm_used_bytes", "Used bytes of /dev/shm, as df shows", used)
        yield gauge("shmguard_shm_avail_bytes", "Bytes of /dev/shm still available", avail)
        yield gauge(
            "shmguard_shm_peak_bytes",
            f"Highest used bytes over the last {self.options.window:g} s (sampled every "
            f"{self.options.interval:g} s and on inotify events)",
            peak,
        )
        pids = self._process_tree()
        # Only files on this /dev/shm (st_dev): other containers' files also read /dev/shm/...
        scan = restrict_to_device(scan_holders(pids=pids, shm_dir=self.path), device)
        owners = GaugeMetricFamily(
            "shmguard_shm_owner_bytes",
            "Bytes of /dev/shm files held (open, mapped or named) per owner kind",
            labels=[*names, "owner"],
        )
        for kind in KINDS:
            owners.add_metric([*values, kind], scan.by_kind.get(kind, 0))
        yield owners
        stalled = self._stalled(used, total, peak, pids)
        failed = CounterMetricFamily(
            "shmguard_shm_failed_allocations",
            "Failed PyTorch shm allocations seen (new zero-block torch_* files)",
            labels=names,
        )
        with self._lock:
            failed.add_metric(values, len(self._failed_seen))
        yield failed
        yield gauge(
            "shmguard_stalled",
            "1 when the job is stalled on a full /dev/shm (shmguard's stall verdict)",
            int(stalled),
        )
        limit, shmem = self._cgroup()
        if limit is not None:
            yield gauge("shmguard_cgroup_memory_limit_bytes", "The memory cgroup's limit", limit)
        if shmem is not None:
            yield gauge(
                "shmguard_cgroup_memory_shmem_bytes",
                "tmpfs/shm bytes charged to the memory cgroup (memory.stat shmem)",
                shmem,
            )
        if self.options.required is not None:
            yield gauge(
                "shmguard_shm_required_bytes",
                "Bytes of /dev/shm the job needs (configured from plan or measure)",
                self.options.required,
            )


class Collector(Protocol):
    """What :class:`ExporterServer` serves: prometheus-client's custom collector protocol
    plus ``close``."""

    def collect(self) -> Iterator[Any]:
        """Yield metric families."""

    def close(self) -> None:
        """Stop any background work."""


#: Connections the exporter serves at once (a thread each).
MAX_CONNECTIONS = 64
#: Seconds a connection may take to send its request (idle and header timeout), and again
#: to be answered (Prometheus's default ``scrape_timeout`` is 10 s too).
TIMEOUT = 10.0


def _handler_class(limits: ConnectionLimits, seconds: float) -> type[Any]:
    from wsgiref.simple_server import WSGIRequestHandler

    class Handler(WSGIRequestHandler):
        """One request per connection, as prometheus-client's handler, with deadlines."""

        timeout = seconds  # each blocking read or write (StreamRequestHandler)
        raw_requestline: bytes

        def log_message(self, format: str, *args: Any) -> None:
            pass  # prometheus-client's handler is silent too

        def parse_request(self) -> bool:
            if not parse_request_within(self, super().parse_request, limits.deadlines):
                return False
            limits.deadlines.set(self.connection, time.monotonic() + seconds, BUSY)
            return True

    return Handler


class ExporterServer:
    """The exporter's HTTP server on its own registry (nothing of the process's default
    registry is exported): prometheus-client's WSGI application (its exposition, content
    negotiation and ``?name[]=`` filters) on a bounded server.

    Limits (:class:`shmguard.serving.ConnectionLimits`, as the webhook's): at most
    ``max_connections`` connections are served at once, a thread each; a connection must send
    its request within ``timeout`` seconds of its accept and is answered within ``timeout``
    more, else its socket is shut down; when every slot is taken, a new connection takes the
    slot of the oldest that has not sent its request yet, and when every slot is being
    answered it waits in the accept loop for up to ``timeout`` (the rest in the kernel's listen
    backlog of :data:`BACKLOG`) and is then closed. So idle or half-sent connections never hold
    more than ``max_connections`` threads, and a scraper gets through them at once. Scrapes
    that come while a collection runs get its families (:attr:`shared`), so concurrent
    scrapers do not each pay for a collection.

    Args:
        collector: a started :class:`ShmCollector` or
            :class:`~shmguard.monitor.node_exporter.NodeCollector`.
        host: address to listen on (``127.0.0.1``, ``::``, ...).
        port: TCP port (0 picks a free one; see :attr:`port`).
        max_connections: connections served at once.
        timeout: seconds for a request to arrive, and for its answer.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(
        self,
        collector: Collector,
        host: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = TIMEOUT,
    ) -> None:
        from prometheus_client import CollectorRegistry, make_wsgi_app

        self.collector = collector
        #: Scrapes at once share one collection (:mod:`shmguard.monitor.shared_scrape`).
        self.shared = SharedCollect(collector)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.shared)
        self.limits = ConnectionLimits(max_connections, "exporter-reaper")
        server_class = _server_class(self.limits, timeout, ":" in host)
        try:
            self._server = server_class((host, port), _handler_class(self.limits, timeout))
        except OSError:
            self.limits.close()
            raise
        self._server.set_app(make_wsgi_app(self.registry))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="exporter-server", daemon=True
        )
        self._thread.start()
        self.host = host
        self.port: int = self._server.server_address[1]

    def shutdown(self) -> None:
        """Stop serving, then stop the collector's sampler."""
        self._server.shutdown()
        self.limits.deadlines.reap(time.monotonic(), everything=True)
        self.limits.close()
        self._server.server_close()
        self._thread.join(timeout=5)
        self.collector.close()


#: The exporter's listen backlog: connections waiting for the accept loop beyond it are
#: refused by the kernel (or their SYN is retried by the client).
BACKLOG = 128


def _server_class(limits: ConnectionLimits, timeout: float, ipv6: bool) -> type[Any]:
    import socketserver
    from wsgiref.simple_server import WSGIServer

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True
        request_queue_size = BACKLOG
        address_family = socket.AF_INET6 if ipv6 else socket.AF_INET

        def process_request(self, request: Any, client_address: Any) -> None:
            if not limits.admit(wait=timeout):
                self.shutdown_request(request)
                return
            limits.deadlines.set(request, time.monotonic() + timeout, IDLE)
            try:
                super().process_request(request, client_address)
            except BaseException:
                limits.release(request)
                raise

        def handle_error(self, request: Any, client_address: Any) -> None:
            import sys

            if not isinstance(sys.exc_info()[1], OSError):  # a client gone, a socket reaped
                super().handle_error(request, client_address)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                limits.release(request)

    return Server

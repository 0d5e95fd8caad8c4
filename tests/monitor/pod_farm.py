"""Pods without a cluster: per pod a sandbox (private tmpfs /dev/shm, optional memory cgroup
limit) running a shell script, and a real ``shmguard exporter`` process watching it with the
pod's downward-API labels (tests, fixture recording). Needs root."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

from exporter_proc import ExporterProcess
from monitor_helpers import MiB, wait_for

from shmguard.measure.sandbox import Sandbox, SandboxSpec


@dataclass(frozen=True)
class FakePod:
    """One pod: its labels, the script its container runs, its /dev/shm and memory limit
    (bytes), and extra ``shmguard exporter`` arguments."""

    namespace: str
    pod: str
    container: str
    script: str
    shm_size: int = 64 * MiB
    memory_limit: int | None = None
    exporter_args: tuple[str, ...] = ()


class PodFarm:
    """Start ``pods`` (sandbox, then its exporter with ``--pid`` of the sandboxed command,
    sampling every 50 ms, a 10 s peak window); :meth:`close` stops everything."""

    def __init__(self, pods: Sequence[FakePod]) -> None:
        self.boxes: list[Sandbox] = []
        self.exporters: list[ExporterProcess] = []
        # A started sandbox blocks SIGTERM and the like in this thread (to forward them, see
        # Sandbox.release); the exporters must not inherit that mask, or SIGTERM cannot stop
        # them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        try:
            for p in pods:
                spec = SandboxSpec(("sh", "-c", p.script), p.shm_size, memory_limit=p.memory_limit)
                box = Sandbox(spec, output="capture")
                box.__enter__()
                self.boxes.append(box)
                box.start()
                # the command (the sandbox init's child) is in the memory cgroup; init is not
                assert wait_for(lambda b=box: bool(b.tree_pids()), timeout=10)
                pid = box.tree_pids()[0]
                args = ["--pid", str(pid), "--interval", "50ms", "--window", "10s"]
                env = {
                    "POD_NAMESPACE": p.namespace,
                    "POD_NAME": p.pod,
                    "CONTAINER_NAME": p.container,
                }
                started = signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                try:
                    self.exporters.append(ExporterProcess([*args, *p.exporter_args], env=env))
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, started)
        except BaseException:
            self.close()
            raise

    @property
    def ports(self) -> list[int]:
        """The exporters' ports."""
        return [e.port for e in self.exporters]

    def close(self) -> list[int]:
        """Stop the exporters, then the sandboxes, last started first (each restores the
        signal mask it found); the exporters' exit statuses."""
        codes = [e.stop() for e in self.exporters]
        for b in reversed(self.boxes):
            b.__exit__(None, None, None)
        return codes

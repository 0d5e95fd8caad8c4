"""Record the Prometheus API answers ``recommend`` reads, from a real run, for the unit tests.

Run as root from the repository root (``python tests/monitor/record_rightsize.py [--serve
SECONDS]``: keep the Prometheus up that long afterwards, to run ``shmguard recommend``); it writes
tests/fixtures/prometheus/rightsize.json: ``{"window": "5m", "now": <unix s>, "answers":
{<PromQL>: <the /api/v1/query JSON>}}``. What runs: a real Prometheus scraping every second
ten real ``shmguard exporter`` processes, one per pod (POD_NAMESPACE/POD_NAME/CONTAINER_NAME
as the downward API sets them), each with ``--pid`` on a sandbox whose private tmpfs /dev/shm a
real ``head -c`` fills, some under a memory cgroup limit and one with ``--required``; and a
static target with kube-state-metrics' owner series for three of the pods and container
memory limits for four, written in kube-state-metrics' format
(docs/metrics/workload/pod-metrics.md, replicaset-metrics.md, job-metrics.md) since no
cluster runs here. The pods' names follow the controllers'
patterns: a Deployment's two pods, another Deployment's pod near its /dev/shm size, a
StatefulSet's two, a CronJob's, a training job's two replicas, a bare pod with no /dev/shm
use, and a bare pod whose name looks like a Job's; and two exporters with no pod labels, as
in Docker.
"""

from __future__ import annotations

import http.server
import json
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pod_farm import FakePod, PodFarm  # noqa: E402
from prom_proc import PrometheusProcess, get  # noqa: E402

from shmguard.monitor.prom import Sample, parse_prom_duration, parse_vector  # noqa: E402
from shmguard.monitor.rightsize import RightsizeOptions, read_histories  # noqa: E402

MiB = 1 << 20
OUT = HERE.parent / "fixtures" / "prometheus" / "rightsize.json"
WINDOW = "5m"
#: (namespace, pod, container, MiB written into /dev/shm, memory limit MiB or None, --required,
#: /dev/shm MiB)
PODS = (
    ("ml", "train-7c9f8b6d5d-x2x4k", "trainer", 20, 512, None, 64),
    ("ml", "train-7c9f8b6d5d-qz7wp", "trainer", 30, 512, None, 64),
    ("ml", "resnet-6f7d9c8b5b-k2m4p", "trainer", 120, 1024, None, 128),
    ("ml", "etl-0", "worker", 10, None, None, 64),
    ("ml", "etl-1", "worker", 5, None, None, 64),
    ("ml", "nightly-29412345-bv7kd", "job", 8, 256, "16m", 64),
    ("ml", "bert-master-0", "pytorch", 12, None, None, 64),
    ("ml", "bert-worker-0", "pytorch", 14, None, None, 64),
    ("ml", "scratch", "shell", 0, None, None, 64),
    ("research", "debug-pod-x2b4z", "main", 3, None, None, 64),
)
#: Exporters outside Kubernetes (Docker, a host: no POD_* variables, so no namespace, pod or
#: container label): (MiB written into /dev/shm, /dev/shm MiB).
DOCKER = ((40, 64), (6, 64))
#: kube-state-metrics' owner series: (metric, help, child label, [(namespace, child, kind, name)]).
OWNERS = (
    (
        "kube_pod_owner",
        "Information about the Pod's owner.",
        "pod",
        [
            ("ml", "train-7c9f8b6d5d-x2x4k", "ReplicaSet", "train-7c9f8b6d5d"),
            ("ml", "train-7c9f8b6d5d-qz7wp", "ReplicaSet", "train-7c9f8b6d5d"),
            ("ml", "nightly-29412345-bv7kd", "Job", "nightly-29412345"),
            ("research", "debug-pod-x2b4z", "<none>", "<none>"),
        ],
    ),
    (
        "kube_replicaset_owner",
        "Information about the ReplicaSet's owner.",
        "replicaset",
        [("ml", "train-7c9f8b6d5d", "Deployment", "train")],
    ),
    (
        "kube_job_owner",
        "Information about the Job's owner.",
        "job_name",
        [("ml", "nightly-29412345", "CronJob", "nightly")],
    ),
)


#: kube-state-metrics' container memory limits (namespace, pod, container, bytes): the train
#: pods' as their cgroups have it; the etl pods' where their exporters see no limit (as an
#: exporter sidecar without --pid reads its own container's cgroup).
LIMITS = (
    ("ml", "train-7c9f8b6d5d-x2x4k", "trainer", 512 * MiB),
    ("ml", "train-7c9f8b6d5d-qz7wp", "trainer", 512 * MiB),
    ("ml", "etl-0", "worker", 2048 * MiB),
    ("ml", "etl-1", "worker", 2048 * MiB),
)


def _ksm_text() -> str:
    metric = "kube_pod_container_resource_limits"
    lines = [
        f"# HELP {metric} The number of requested limit resource by a container.",
        f"# TYPE {metric} gauge",
    ]
    for ns, pod, container, limit in LIMITS:
        lines.append(
            f'{metric}{{namespace="{ns}",pod="{pod}",container="{container}",node="node-1",'
            f'resource="memory",unit="byte"}} {limit}'
        )
    for metric, doc, child, rows in OWNERS:
        lines += [f"# HELP {metric} {doc}", f"# TYPE {metric} gauge"]
        for ns, name, kind, owner in rows:
            ctl = "<none>" if kind == "<none>" else "true"
            lines.append(
                f'{metric}{{namespace="{ns}",{child}="{name}",owner_kind="{kind}",'
                f'owner_name="{owner}",owner_is_controller="{ctl}"}} 1'
            )
    return "\n".join(lines) + "\n"


class _Ksm(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = _ksm_text().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    ksm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ksm)
    threading.Thread(target=ksm.serve_forever, daemon=True).start()
    pods = [
        FakePod(
            namespace,
            pod,
            container,
            f"head -c {fill}M /dev/zero > /dev/shm/data; sleep 600",
            shm_size=shm * MiB,
            memory_limit=limit and limit * MiB,
            exporter_args=("--required", required) if required else (),
        )
        for namespace, pod, container, fill, limit, required, shm in PODS
    ]
    pods += [
        FakePod("", "", "", f"head -c {fill}M /dev/zero > /dev/shm/data; sleep 600", shm * MiB)
        for fill, shm in DOCKER
    ]
    with tempfile.TemporaryDirectory() as tmp:
        prom = PrometheusProcess(Path(tmp))
        farm = None
        try:
            farm = PodFarm(pods)
            prom.scrape([*farm.ports, ksm.server_address[1]])
            time.sleep(25)
            now = time.time()
            answers: dict[str, object] = {}

            def query(expr: str) -> list[Sample]:
                url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode(
                    {"query": expr, "time": f"{now:.3f}"}
                )
                answers[expr] = json.loads(get(url))
                return parse_vector(answers[expr], prom.url)

            options = RightsizeOptions(window=parse_prom_duration(WINDOW), window_text=WINDOW)
            histories, owners = read_histories(query, options)
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_text(
                json.dumps({"window": WINDOW, "now": now, "answers": answers}, indent=1) + "\n"
            )
            print(f"{OUT}: {len(answers)} answers, {len(histories)} workloads by {owners}")
            for h in histories:
                print(h.namespace, h.workload, h.container, h.pods, h.peak, h.memory_limit)
            if len(sys.argv) > 2 and sys.argv[1] == "--serve":
                # keep everything up for SECONDS, to run `shmguard recommend` against it
                print(f"serving {prom.url} for {sys.argv[2]} s", flush=True)
                time.sleep(float(sys.argv[2]))
        finally:
            if farm is not None:
                farm.close()
            prom.stop()
            ksm.shutdown()


if __name__ == "__main__":
    main()

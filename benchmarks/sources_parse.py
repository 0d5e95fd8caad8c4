"""Throughput of the sources layer over ../shared/corpus against a bare PyYAML C parse.

Prints files/s and MB/s for (1) ``yaml.compose_all(CSafeLoader)`` over every YAML file of
corpus/compose and corpus/k8s and (2) the same files through ``shmguard.sources.load``
(decode, guards, node views, Compose services / Kubernetes pod specs with their containers
and volumes), then the ratio (issue 8's target for ``check``: at least 60 % of the bare parse).

    python benchmarks/sources_parse.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from shmguard.sources.load import load_bytes

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"


def _bare(files: list[tuple[str, bytes]]) -> None:
    for _, data in files:
        for _ in yaml.compose_all(data.decode("utf-8"), Loader=yaml.CSafeLoader):
            pass


def _sources(files: list[tuple[str, bytes]]) -> None:
    for name, data in files:
        lf = load_bytes(data, name)
        for pod in lf.pod_specs:
            for c in pod.containers:
                _ = (c.memory_limit, c.volume_mounts)
        for cf in lf.compose:
            for s in cf.services:
                _ = (s.shm_size, s.ipc, s.mounts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    paths = sorted(p for k in ("compose", "k8s") for p in (CORPUS / k).rglob("*") if p.is_file())
    files = [(str(p), p.read_bytes()) for p in paths]
    mb = sum(len(d) for _, d in files) / 1e6
    best: dict[str, float] = {}
    for label, fn in (("bare PyYAML C compose", _bare), ("shmguard sources", _sources)):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn(files)
            times.append(time.perf_counter() - t)
        best[label] = min(times)
        print(
            f"{label:24s} {len(files) / best[label]:8.0f} files/s {mb / best[label]:7.2f} MB/s"
            f"  ({len(files)} files, {mb:.2f} MB, best of {args.repeat})"
        )
    ratio = best["bare PyYAML C compose"] / best["shmguard sources"]
    print(f"sources / bare parse throughput: {ratio:.0%} (target >= 60%)")


if __name__ == "__main__":
    main()

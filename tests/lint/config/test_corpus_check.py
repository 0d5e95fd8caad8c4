"""Every file of ../shared/corpus is checked without a crash; the findings per code are a
snapshot reviewed by hand (docs/check.md, "Corpus review": a sample of each code read against
its file, with the false positives found).

A change in these counts is a change in what users see: review a sample of the new findings
before updating them.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from shmguard.lint.check import check_loaded
from shmguard.sources.discover import discover
from shmguard.sources.load import load_bytes, load_path

CORPUS = Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus (next to the repository) is absent"
)

#: Reviewed by hand (docs/check.md, "Corpus review"): SHM001 148 (16 sampled: 4 false
#: positives), SHM008 70 (12: 0), SHM009 2 (2: 0), SHM011 30 (12: 0), SHM023 25 (12 of an
#: earlier 33: 2, hostIPC on an agent and a device plugin, no longer flagged), SHM005 5 (all 5
#: read: 0 false positives; 20G/6G beside an 8Gi or 2Gi shm in vLLM's docs, 64M beside 64Mi),
#: SHM026 9 (all 9 read: 0; a dshm without sizeLimit on KubeRay's Ray container, in KubeRay's
#: and GKE's samples), SHM007 1 (1: 0; aibrix's StormService defines a memory emptyDir
#: `shared-mem` that its vLLM TP=2 container never mounts: SHM001 reported it before SHM007
#: existed, hence SHM001 148 -> 147), SHM010 85 (6 read: 0; issue 21 judges an unsized memory
#: dshm as sized to its container's memory limit: OME's runtimes, GKE's and kserve's serving
#: samples, kubernetes/examples' vLLM Deployment, each a dshm with no sizeLimit beside a
#: 2-30Gi limit, so /dev/shm may take all of it). SHM001 147 -> 156: 9 PostgreSQL services at
#: info (the database class, issue 22 item 3; all 9 read: plain postgres/bitnami images in
#: Compose stacks, none sets parallel workers, so none is a warning).
SNAPSHOT = {
    "SHM001": 156,
    "SHM005": 5,
    "SHM007": 1,
    "SHM026": 9,
    "SHM008": 70,
    "SHM009": 2,
    "SHM010": 85,
    "SHM011": 30,
    "SHM023": 25,
}


def test_corpus_findings_per_code() -> None:
    counts: Counter[str] = Counter()
    for f in discover([str(CORPUS / "compose"), str(CORPUS / "k8s")]):
        result = check_loaded(load_path(f))
        assert not result.diagnostics, (f, result.diagnostics)
        counts.update(x.code for x in result.findings)
    with (CORPUS / "docker_run_lines.tsv").open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            lf = load_bytes(row["command"].encode(), row["corpus_path"] + ".sh")
            counts.update(x.code for x in check_loaded(lf).findings)
    assert dict(counts) == SNAPSHOT

"""Every public report in shared/cases/public_reports.jsonl (copied to
tests/fixtures/logs/) is a test.

* The report's expected kind ranks first: it is the top result's kind, one of the kinds the
  top result lists in ``also`` (ambiguous signatures list every candidate), or a kind of
  the catalogue that the report's label stands for (``shmguard.triage.scoring.ACCEPTS``).
* Confusable reports (cgroup OOM, CUDA OOM, NCCL networking) never get shm advice: no result
  prints a /dev/shm size.
* Reports labelled by the runtime whose config fixed them get that runtime's snippet when
  ``--runtime`` names it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from _triage_helpers import FIXTURES, diagnose_text

from shmguard.fix.snippets import fix_snippets
from shmguard.triage.model import Diagnosis, Signature
from shmguard.triage.scoring import accepts

CASES = [
    json.loads(line)
    for line in (FIXTURES / "public_reports.jsonl").read_text().splitlines()
    if line.strip()
]

CONFUSABLE = {"cgroup_oom", "cuda_oom", "nccl_network"}
RUNTIME_OF_LABEL = {
    "k8s_emptydir": "kubernetes",
    "compose_config": "compose",
    "docker_run_config": "docker",
}


def _accepts(case_kind: str) -> frozenset[str]:
    return accepts(case_kind)


def _run(case: dict[str, str], catalogue: Sequence[Signature], **kw: object) -> Diagnosis:
    return diagnose_text(case["log"], catalogue, **kw)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_expected_kind_ranks_first(case: dict[str, str], catalogue: Sequence[Signature]) -> None:
    d = _run(case, catalogue)
    assert d.results, f"{case['id']}: nothing matched"
    top = d.results[0]
    kinds = {top.kind, *top.also}
    assert kinds & _accepts(case["kind"]), (
        f"{case['id']}: expected {case['kind']}, top is {top.id} ({top.kind}, also {top.also})"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] in CONFUSABLE], ids=lambda c: c["id"]
)
def test_confusable_reports_get_no_shm_advice(
    case: dict[str, str], catalogue: Sequence[Signature]
) -> None:
    d = _run(case, catalogue)
    for r in d.results:
        assert r.remedy != "shm-size" or r.explained_by, f"{case['id']}: {r.id} advises shm"
        assert r.fix is None or r.fix.shm_size is None, f"{case['id']}: {r.id} prints a size"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "other"], ids=lambda c: c["id"])
def test_other_reports_are_not_called_shm_capacity(
    case: dict[str, str], catalogue: Sequence[Signature]
) -> None:
    d = _run(case, catalogue)
    strong = [r for r in d.results if r.confidence != "low"]
    assert all(r.remedy != "shm-size" for r in strong), [r.id for r in strong]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "case", [c for c in CASES if c["kind"] in RUNTIME_OF_LABEL], ids=lambda c: c["id"]
)
def test_runtime_labelled_reports_get_their_runtime_fix(
    case: dict[str, str], catalogue: Sequence[Signature]
) -> None:
    runtime = RUNTIME_OF_LABEL[case["kind"]]
    d = _run(case, catalogue, runtime=runtime)
    fix = d.results[0].fix
    assert fix is not None and fix.runtime == runtime
    assert [s.runtime for s in fix_snippets(fix)] == [runtime]
    if runtime == "kubernetes":
        assert "medium: Memory" in fix_snippets(fix)[0].text


def test_ambiguous_reports_name_the_deciding_evidence(catalogue: Sequence[Signature]) -> None:
    # detectron2 #384 (shm) and Stark #7 (memory limit) show the same single line.
    by_id = {c["id"]: c for c in CASES}
    a = _run(by_id["detectron2-384-exited-unexpectedly"], catalogue)
    b = _run(by_id["stark-7-exited-docker-memlimit"], catalogue)
    assert a.results[0].id == b.results[0].id == "dataloader-worker-exited"
    top = a.results[0]
    assert top.confidence == "low" and set(top.also) == {"dataloader_shm", "cgroup_oom"}
    assert "Bus error" in top.decide and "OOMKilled" in top.decide
    assert a.exit_code == 0


def test_every_report_is_covered() -> None:
    assert len(CASES) == 35

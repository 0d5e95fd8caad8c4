"""``--baseline``: fingerprints without line numbers, counting, and the file format."""

from __future__ import annotations

import json

import pytest

from shmguard.lint.baseline import (
    Baseline,
    BaselineError,
    entries,
    fingerprint,
    parse_baseline,
)
from shmguard.lint.check import FileResult, check_loaded
from shmguard.sources.load import load_bytes

COMPOSE = """\
services:
  train:
    image: pytorch/pytorch:2.3.0
  serve:
    image: nginx
    shm_size: 2Gi
"""
SCRIPT = "docker run --shm-size=2Gi nginx\ndocker run --shm-size=2Gi nginx\n"


def check(text: str, name: str) -> tuple[FileResult, bytes]:
    data = text.encode()
    return check_loaded(load_bytes(data, name)), data


def test_a_known_finding_stays_known_after_lines_are_inserted_above() -> None:
    old = check(COMPOSE, "compose.yaml")
    base = Baseline.of(entries([old]))
    moved = "# a comment\nx-common: &c {}\n" + COMPOSE
    result, data = check(moved, "compose.yaml")
    assert [(f.code, f.location.line if f.location else 0) for f in result.findings] == [
        ("SHM001", 4),
        ("SHM002", 8),
    ]
    left, dropped = base.new_findings(result, data)
    assert (left.findings, dropped) == ((), 2)
    # the fingerprints are equal although every line number changed
    assert [fingerprint(f, data) for f in result.findings] == [
        fingerprint(f, old[1]) for f in old[0].findings
    ]


def test_a_new_finding_is_reported_and_a_changed_value_is_new() -> None:
    base = Baseline.of(entries([check(COMPOSE, "compose.yaml")]))
    grown = COMPOSE + "  extra:\n    image: vllm/vllm-openai:v0.6.0\n"
    left, dropped = base.new_findings(*check(grown, "compose.yaml"))
    assert [(f.code, f.location.path if f.location else None) for f in left.findings] == [
        ("SHM001", "services.extra")
    ]
    assert dropped == 2
    changed = COMPOSE.replace("shm_size: 2Gi", "shm_size: 4Gi")
    left, dropped = base.new_findings(*check(changed, "compose.yaml"))
    assert [f.code for f in left.findings] == ["SHM002"] and dropped == 1
    # another file name: nothing is known
    left, dropped = base.new_findings(*check(COMPOSE, "other/compose.yaml"))
    assert len(left.findings) == 2 and dropped == 0


def test_identical_run_lines_are_counted() -> None:
    one = "docker run --shm-size=2Gi nginx\n"
    base = Baseline.of(entries([check(one, "run.sh")]))
    left, dropped = base.new_findings(*check("echo hi\n" + SCRIPT, "run.sh"))
    assert dropped == 1
    assert [(f.code, f.location.line if f.location else 0) for f in left.findings] == [
        ("SHM002", 3)
    ]


def test_entries_carry_readable_path_and_value() -> None:
    found = entries([check(COMPOSE, "dir/compose.yaml")])
    assert [(e.file, e.code, e.path, e.value) for e in found] == [
        ("dir/compose.yaml", "SHM001", "services.train", "train"),
        ("dir/compose.yaml", "SHM002", "services.serve.shm_size", "2Gi"),
    ]
    assert all(len(e.fingerprint) == 16 for e in found)


def test_parse_round_trip_and_errors() -> None:
    found = entries([check(COMPOSE, "compose.yaml")])
    doc = {
        "schema": "shmguard.baseline/1",
        "version": "0.1.0",
        "findings": [{"file": e.file, "code": e.code, "fingerprint": e.fingerprint} for e in found],
    }
    base = parse_baseline(json.dumps(doc), "b.json")
    assert dict(base.known) == {(e.file, e.code, e.fingerprint): 1 for e in found}
    with pytest.raises(BaselineError, match=r"^b\.json: not JSON"):
        parse_baseline("{", "b.json")
    with pytest.raises(BaselineError, match=r"not a shmguard baseline"):
        parse_baseline('{"schema": "shmguard.check/1"}', "b.json")
    with pytest.raises(BaselineError, match=r"findings\[0\]: needs file, code and fingerprint"):
        parse_baseline('{"schema": "shmguard.baseline/1", "findings": [{"file": 1}]}', "b.json")

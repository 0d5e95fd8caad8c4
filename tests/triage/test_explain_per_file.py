"""Per-file diagnosis: :func:`shmguard.triage.explain_each` and ``shmguard explain --per-file``
(a real subprocess), on real fixture logs: each file its own causes, runtime, facts and fix;
JSON validated against the packaged schema; unreadable files among readable ones; stdin."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from _triage_helpers import FIXTURES

import shmguard
import shmguard.triage
from schema_registry import validator
from shmguard.render.json import to_data
from shmguard.render.json_bodies import explain_body as json_body
from shmguard.triage import explain_each, explain_files
from shmguard.triage.matchers import Matcher
from shmguard.triage.model import Signature
from shmguard.triage.text import top_cause

SCHEMA = validator("explain")
# Two real logs with different causes: a pod OOM-killed at its 16Gi memory limit (kubectl
# describe), and torch 2.13 failing to allocate shared memory in a 64 MiB /dev/shm.
K8S_OOM = FIXTURES / "kubectl_describe_oomkilled.txt"
TORCH_SHM = FIXTURES / "torch_2.13" / "S01_f32_bs32_nw4.txt"
CLEAN = FIXTURES / "nothing_known.log"
NO_CAUSE = FIXTURES / "torch_2.13" / "S02_f32_bs8_nw2.txt"


def run(
    *args: str, stdin: bytes | None = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", "from shmguard.cli import main; main()", "explain", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": ":".join(sys.path)},
    )


def data(d: Any) -> Any:
    return json.loads(json.dumps(to_data(json_body(d))))


def top_id(d: shmguard.Diagnosis) -> str | None:
    top = top_cause(d.results)
    return top.id if top else None


# --- library --------------------------------------------------------------------------------


def test_each_file_gets_its_own_diagnosis(catalogue: Sequence[Signature]) -> None:
    each = list(explain_each([K8S_OOM, TORCH_SHM], signatures=catalogue))
    assert [name for name, _ in each] == [str(K8S_OOM), str(TORCH_SHM)]
    (_, oom), (_, shm) = each
    assert top_id(oom) == "memory-oom-kill" and top_id(shm) == "torch-shm-alloc-failed"
    # Runtime and facts come from the file itself: the pod's memory limit does not size the
    # torch log's fix, and the torch log has no runtime of its own.
    assert (oom.runtime, shm.runtime) == ("kubernetes", None)
    assert [f.name for f in oom.facts] == ["mem_limit", "shm_total"] and shm.facts == ()
    assert [i.name for i in oom.inputs] == [str(K8S_OOM)]
    assert [i.name for i in shm.inputs] == [str(TORCH_SHM)]
    assert {ev.file for r in shm.results for ev in r.evidence} == {str(TORCH_SHM)}
    assert oom.exit_code == shm.exit_code == 1
    # Exactly what explaining each file alone gives.
    for name, d in each:
        assert data(d) == data(explain_files([Path(name)], signatures=catalogue))

    merged = explain_files([K8S_OOM, TORCH_SHM], signatures=catalogue)
    assert top_id(merged) == "torch-shm-alloc-failed" and merged.runtime == "kubernetes"
    assert [r.id for r in merged.results if r.explained_by is None][:2] == [
        "torch-shm-alloc-failed",
        "memory-oom-kill",
    ]


def test_streams_and_paths_mixed_and_flags_apply_to_each(catalogue: Sequence[Signature]) -> None:
    stream = ("job stderr", io.BytesIO(TORCH_SHM.read_bytes()))
    each = dict(
        explain_each(
            [stream, K8S_OOM, CLEAN],
            signatures=catalogue,
            runtime="compose",
            shm_size=3 * 1024**3,
        )
    )
    assert list(each) == ["job stderr", str(K8S_OOM), str(CLEAN)]
    assert all(d.runtime == "compose" and d.runtime_source == "flag" for d in each.values())
    fix = each["job stderr"].results[0].fix
    assert fix is not None and fix.shm_size is not None and fix.shm_size.bytes == 3 * 1024**3
    assert each["job stderr"].inputs[0].lines == TORCH_SHM.read_bytes().count(b"\n")
    assert each[str(CLEAN)].results == () and each[str(CLEAN)].exit_code == 0
    assert each[str(CLEAN)].next_steps  # its own next steps, though the others had causes


def test_inputs_are_read_one_at_a_time_with_one_matcher(
    catalogue: Sequence[Signature], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Matcher] = []

    class Counting(Matcher):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(shmguard.triage, "Matcher", Counting)
    asked: list[str] = []

    def inputs() -> Iterator[tuple[str, BinaryIO]]:
        for p in (K8S_OOM, TORCH_SHM, CLEAN):
            asked.append(p.name)
            with p.open("rb") as f:
                yield p.name, f

    each = explain_each(inputs(), signatures=catalogue)
    assert asked == []  # lazy: nothing read before the first diagnosis is asked for
    name, d = next(each)
    assert asked == [K8S_OOM.name] and name == K8S_OOM.name and top_id(d) == "memory-oom-kill"
    name, d = next(each)
    assert asked == [K8S_OOM.name, TORCH_SHM.name] and name == TORCH_SHM.name
    assert top_id(d) == "torch-shm-alloc-failed"
    assert [n for n, _ in each] == [CLEAN.name]
    assert len(built) == 1


def test_an_unreadable_path_stops_and_the_same_iterator_goes_on(
    catalogue: Sequence[Signature], tmp_path: Path
) -> None:
    missing = tmp_path / "gone.log"
    paths = iter([K8S_OOM, missing, TORCH_SHM])
    each = explain_each(paths, signatures=catalogue)
    assert top_id(next(each)[1]) == "memory-oom-kill"
    with pytest.raises(FileNotFoundError) as err:
        next(each)
    assert err.value.filename == str(missing)
    rest = list(explain_each(paths, signatures=catalogue))
    assert [(n, top_id(d)) for n, d in rest] == [(str(TORCH_SHM), "torch-shm-alloc-failed")]


def test_public_api_exports_explain_each() -> None:
    assert "explain_each" in shmguard.__all__ and shmguard.explain_each is explain_each
    assert "explain_each" in shmguard.triage.__all__


# --- command line ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_per_file_text_has_a_section_per_file_merged_has_one() -> None:
    r = run("--per-file", str(K8S_OOM), str(TORCH_SHM))
    out = r.stdout.decode()
    assert r.returncode == 1 and r.stderr == b""
    first, second = out.split(f"==> {TORCH_SHM} <==\n")
    assert first.startswith(f"==> {K8S_OOM} <==\nshmguard explain: {K8S_OOM} (38 lines")
    assert "Runtime: kubernetes (from line 6: `Controlled By:  Job/train`" in first
    assert "Runtime:" not in second
    assert "1. [HIGH] Killed by the OOM killer (memory limit)" in first
    assert "torch-shm-alloc-failed" not in first
    assert "1. [HIGH] PyTorch could not allocate a shared-memory block" in second
    assert "memory-oom-kill" not in second.split("Summary, per file:")[0]
    # Each section has its result without an exit status; the summary has the status.
    assert first.count("Result: 1 cause of medium confidence or more.\n") == 1
    assert out.count("(exit") == 1
    assert out.endswith(
        "Summary, per file:\n"
        f"  {K8S_OOM}  [HIGH] Killed by the OOM killer (memory limit), not a /dev/shm "
        "problem  [memory-oom-kill]\n"
        f"  {str(TORCH_SHM).ljust(len(str(K8S_OOM)))}  [HIGH] PyTorch could not allocate a "
        "shared-memory block: /dev/shm is full  [torch-shm-alloc-failed]\n"
        "Result: 2 of 2 files with a cause of medium confidence or more (exit 1).\n"
    )

    merged = run(str(K8S_OOM), str(TORCH_SHM)).stdout.decode()
    assert "==>" not in merged and merged.count("shmguard explain: ") == 1
    assert merged.count("\n1. ") == 1 and "\n1. [HIGH] PyTorch could not allocate" in merged
    # Merged, the evidence names the file it came from.
    assert f"Runtime: kubernetes (from {K8S_OOM} line 6: `Controlled By:  Job/train`" in merged


@pytest.mark.timeout(60)
def test_per_file_json_validates_and_each_entry_is_that_file_alone() -> None:
    r = run("--per-file", "--json", str(K8S_OOM), str(TORCH_SHM))
    doc = json.loads(r.stdout)
    SCHEMA.validate(doc)
    assert r.returncode == doc["exit_code"] == 1 and doc["errors"] == []
    assert [f["file"] for f in doc["files"]] == [str(K8S_OOM), str(TORCH_SHM)]
    assert [f["results"][0]["id"] for f in doc["files"]] == [
        "memory-oom-kill",
        "torch-shm-alloc-failed",
    ]
    for entry in doc["files"]:
        alone = json.loads(run("--json", entry["file"]).stdout)
        del alone["schema"], alone["version"]
        assert {k: v for k, v in entry.items() if k != "file"} == alone

    merged = json.loads(run("--json", str(K8S_OOM), str(TORCH_SHM)).stdout)
    SCHEMA.validate(merged)
    assert "files" not in merged and len(merged["inputs"]) == 2
    assert merged["results"][0]["id"] == "torch-shm-alloc-failed"


@pytest.mark.timeout(60)
def test_unreadable_files_are_one_line_each_and_the_others_are_diagnosed(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "gone.log")
    # /proc/self/mem stats as a regular file but reading offset 0 fails with EIO.
    args = [str(K8S_OOM), missing, str(FIXTURES), "/proc/self/mem", str(TORCH_SHM)]
    r = run("--per-file", "--json", *args)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [
        f"shmguard: error: {missing}: no such file",
        f"shmguard: error: {FIXTURES}: is a directory, not a log file",
        "shmguard: error: /proc/self/mem: read error at byte 0: Input/output error",
    ]
    doc = json.loads(r.stdout)
    SCHEMA.validate(doc)
    assert doc["exit_code"] == 2
    assert [(f["file"], f["results"][0]["id"]) for f in doc["files"]] == [
        (str(K8S_OOM), "memory-oom-kill"),
        (str(TORCH_SHM), "torch-shm-alloc-failed"),
    ]
    assert doc["errors"] == [
        {"file": missing, "error": "no such file"},
        {"file": str(FIXTURES), "error": "is a directory, not a log file"},
        {"file": "/proc/self/mem", "error": "read error at byte 0: Input/output error"},
    ]

    text = run("--per-file", *args)
    out = text.stdout.decode()
    assert text.returncode == 2 and text.stderr == r.stderr
    assert out.count("==> ") == 2
    assert f"  {missing.ljust(len(missing))}  not read: no such file\n" in out
    assert "  /proc/self/mem" in out and "not read: read error at byte 0" in out
    assert out.endswith(
        "Result: 2 of 5 files with a cause of medium confidence or more, 3 not read (exit 2).\n"
    )

    nothing = run("--per-file", missing)
    assert nothing.returncode == 2
    assert nothing.stdout.decode() == (
        f"Summary, per file:\n  {missing}  not read: no such file\n"
        "Result: 0 of 1 file with a cause of medium confidence or more, 1 not read (exit 2).\n"
    )

    # Without --per-file an unreadable file is still a usage error before any output.
    plain = run(str(K8S_OOM), missing)
    assert plain.returncode == 2 and plain.stdout == b""
    assert plain.stderr.decode() == f"shmguard: error: {missing}: no such file\n"


@pytest.mark.timeout(60)
def test_stdin_is_one_file() -> None:
    r = run("--per-file", "--json", str(K8S_OOM), "-", stdin=TORCH_SHM.read_bytes())
    doc = json.loads(r.stdout)
    SCHEMA.validate(doc)
    assert r.returncode == 1
    assert [(f["file"], f["inputs"][0]["name"], f["results"][0]["id"]) for f in doc["files"]] == [
        (str(K8S_OOM), str(K8S_OOM), "memory-oom-kill"),
        ("<stdin>", "<stdin>", "torch-shm-alloc-failed"),
    ]
    implicit = run("--per-file", stdin=K8S_OOM.read_bytes())
    out = implicit.stdout.decode()
    assert implicit.returncode == 1
    assert out.startswith("==> <stdin> <==\nshmguard explain: <stdin> (38 lines")
    assert "Result: 1 of 1 file with a cause of medium confidence or more (exit 1).\n" in out


@pytest.mark.timeout(60)
def test_exit_0_when_no_file_has_a_cause() -> None:
    r = run("--per-file", "--json", str(CLEAN), str(NO_CAUSE))
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"] == 0
    assert [f["exit_code"] for f in doc["files"]] == [0, 0]
    assert all(f["next_steps"] for f in doc["files"])
    r = run("--per-file", str(CLEAN), str(TORCH_SHM))
    assert r.returncode == 1
    assert r.stdout.decode().endswith(
        "Result: 1 of 2 files with a cause of medium confidence or more (exit 1).\n"
    )


@pytest.mark.timeout(60)
def test_other_flags_apply_to_every_file(tmp_path: Path) -> None:
    shm_then_oom = (FIXTURES / "shm_then_oom.log").read_bytes()
    flags = ("--runtime", "k8s", "--shm-size", "3g")
    r = run("--per-file", "--json", *flags, str(TORCH_SHM), "-", stdin=shm_then_oom)
    doc = json.loads(r.stdout)
    SCHEMA.validate(doc)
    assert [f["results"][0]["id"] for f in doc["files"]] == [
        "torch-shm-alloc-failed",
        "dataloader-bus-error",
    ]
    for entry in doc["files"]:
        assert entry["runtime"] == "kubernetes" and entry["runtime_source"] == "flag"
        fix = entry["results"][0]["fix"]
        assert fix["shm_size"]["bytes"] == 3 * 1024**3
        assert [s["runtime"] for s in fix["snippets"]] == ["kubernetes"]
    # --evidence and --signatures (the catalogue is loaded once, extra signatures included).
    sigs = tmp_path / "sigs"
    sigs.mkdir()
    (sigs / "mine.toml").write_text(
        'id = "my-failure"\ntitle = "My failure"\nkind = "my_kind"\nconfidence = "high"\n'
        'remedy = "investigate"\ncause = "Because."\n\n[[patterns]]\nname = "main"\n'
        'literal = "my special failure"\n\n[fix]\nsummary = "Do the thing."\n'
    )
    mine = tmp_path / "mine.log"
    mine.write_text("my special failure 1\nmy special failure 2\n")
    r = run("--per-file", "--evidence", "1", "--signatures", str(sigs), str(mine), str(K8S_OOM))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "1. [HIGH] My failure  [my-failure]" in out
    assert "Evidence (1 of 2 lines):" in out and f"{mine}:2" not in out
    assert "Evidence (1 of 2 lines):\n     " + f"{K8S_OOM}:13  Reason:       OOMKilled\n" in out


@pytest.mark.timeout(60)
def test_usage_errors_still_stop_before_any_file() -> None:
    r = run("--per-file", "--runtime", "swarm", str(TORCH_SHM))
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode().startswith("shmguard: error: --runtime: 'swarm' is not one of")
    r = run("--per-file", "-", "-")
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode() == "shmguard: error: '-' (standard input) can be given only once\n"


@pytest.mark.timeout(60)
def test_help_describes_per_file() -> None:
    out = " ".join(run("--help").stdout.decode().split())
    assert "--per-file Diagnose each file on its own" in out
    assert (
        "Several files are one incident (e.g. the logs and the describe output of one pod), "
        "unless --per-file." in out
    )

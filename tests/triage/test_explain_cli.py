"""`shmguard explain` as users run it (a real subprocess): exit codes, stdin, text and JSON
output (validated against the packaged schema), --runtime, --shm-size, user signatures from
--signatures and from .shmguard.toml, and one-line usage errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _triage_helpers import FIXTURES

from schema_registry import validator
from shmguard.render.json import envelope
from shmguard.render.json_bodies import explain_body as json_body
from shmguard.triage import explain_streams
from shmguard.triage.model import Signature

S01 = FIXTURES / "torch_2.13" / "S01_f32_bs32_nw4.txt"
S02 = FIXTURES / "torch_2.13" / "S02_f32_bs8_nw2.txt"
SCHEMA = validator("explain")

USER_SIG = """
id = "my-failure"
title = "My failure"
kind = "my_kind"
confidence = "high"
remedy = "investigate"
cause = "Because."
references = ["https://example.org/1"]

[[patterns]]
name = "main"
literal = "my special failure"

[fix]
summary = "Do the thing."
"""


def run(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", "from shmguard.cli import main; main()", "explain", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": ":".join(sys.path)},
    )


@pytest.mark.timeout(60)
def test_failure_exit_1_text(tmp_path: Path) -> None:
    r = run(str(S01))
    out = r.stdout.decode()
    assert r.returncode == 1, r.stderr
    assert (
        "1. [HIGH] PyTorch could not allocate a shared-memory block: /dev/shm is full  "
        "[torch-shm-alloc-failed]" in out
    )
    assert (
        f"{S01}:49  RuntimeError: unable to allocate shared memory(shm) for file "
        "</torch_22128_2334166919_0>: No space left on device (28)" in out
    )
    assert "docker run --shm-size=1g IMAGE ..." in out
    assert "Result: 1 cause of medium confidence or more (exit 1)." in out
    assert "\x1b" not in out and r.stderr == b""


@pytest.mark.timeout(60)
def test_narrow_output_keeps_commands_and_snippets_whole() -> None:
    # COLUMNS=40 and a pipe: Rich would wrap at 40; a wrapped snippet cannot be pasted.
    r = subprocess.run(
        [sys.executable, "-c", "from shmguard.cli import main; main()", "explain", str(S01)],
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "40", "PYTHONPATH": ":".join(sys.path)},
    )
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 1, r.stderr
    assert "       docker run --shm-size=1g IMAGE ..." in lines
    assert "           - name: app  # your container's name: these keys merge into it" in lines
    measure = "Next: Measure the real peak with `shmguard measure -- <your command>` (or find"
    assert any(line.strip().startswith(measure) for line in lines)  # a step is one line


@pytest.mark.timeout(60)
def test_clean_log_exit_0_and_next_steps() -> None:
    r = run(str(FIXTURES / "nothing_known.log"))
    out = r.stdout.decode()
    assert r.returncode == 0
    assert "No known failure cause matched" in out
    assert "shmguard doctor" in out and "NCCL_DEBUG=INFO" in out and "num_workers=0" in out


@pytest.mark.timeout(60)
def test_stdin_dash_and_implicit() -> None:
    data = S01.read_bytes()
    for args in (("-",), ()):
        r = run("--json", *args, stdin=data)
        assert r.returncode == 1, r.stderr
        d = json.loads(r.stdout)
        assert d["inputs"][0]["name"] == "<stdin>"
        assert d["results"][0]["id"] == "torch-shm-alloc-failed"


@pytest.mark.timeout(60)
def test_json_validates_and_runtime_flag() -> None:
    r = run("--json", "--runtime", "kubernetes", "--shm-size", "3g", str(S01))
    d = json.loads(r.stdout)
    SCHEMA.validate(d)
    assert d["schema"] == "shmguard.explain/1" and d["runtime"] == "kubernetes"
    assert d["runtime_source"] == "flag" and d["exit_code"] == r.returncode == 1
    fix = d["results"][0]["fix"]
    # version 1's keys unchanged; the one size value's fields added beside them
    size = fix["shm_size"]
    assert {k: size[k] for k in ("bytes", "method")} == {
        "bytes": 3 * 1024**3,
        "method": "the size given with --shm-size",
    }
    assert size["basis"] == size["method"] and size["source"] == "flag"
    assert size["problems"] == [] and size["memory_limit"] is None
    assert [s["runtime"] for s in fix["snippets"]] == ["kubernetes"]
    assert "sizeLimit: 3Gi" in fix["snippets"][0]["text"]


@pytest.mark.timeout(60)
def test_app_runtime_text_has_no_snippet() -> None:
    out = run("--runtime", "app", str(S01)).stdout.decode()
    assert "--shm-size" not in out and "Application side:" in out


@pytest.mark.timeout(60)
def test_multiple_files_and_order_text() -> None:
    r = run(str(FIXTURES / "shm_then_oom.log"), str(S02))
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "Order: The shared-memory failure (line 3) came before the OOM kill (line 5)" in out
    assert f"{S02.name} (8 lines" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("/no/such/log",), "shmguard: error: /no/such/log: no such file\n"),
        ((str(FIXTURES),), f"shmguard: error: {FIXTURES}: is a directory, not a log file\n"),
        (
            ("--runtime", "swarm", str(S01)),
            "shmguard: error: --runtime: 'swarm' is not one of docker, compose, kubernetes, "
            "podman, ecs, slurm, apptainer, sagemaker, azureml, databricks, colab, app\n",
        ),
        (("--shm-size", "2Q", str(S01)), "shmguard: error: --shm-size: invalid size '2Q'"),
        (("-", "-"), "shmguard: error: '-' (standard input) can be given only once\n"),
        (
            ("--signatures", "/no/such/dir", str(S01)),
            "shmguard: error: /no/such/dir: not a directory of signature files\n",
        ),
    ],
)
@pytest.mark.timeout(60)
def test_usage_errors_exit_2_one_line(args: tuple[str, ...], message: str) -> None:
    r = run(*args, stdin=b"")
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.startswith(message.rstrip("\n")) and err.count("\n") == 1, err
    assert r.stdout == b""


@pytest.mark.timeout(60)
def test_user_signatures_flag_and_config(tmp_path: Path) -> None:
    sigs = tmp_path / "sigs"
    sigs.mkdir()
    (sigs / "mine.toml").write_text(USER_SIG)
    log = tmp_path / "job.log"
    log.write_text("step 1\nERROR my special failure here\n")
    d = json.loads(run("--json", "--signatures", str(sigs), str(log)).stdout)
    assert d["results"][0]["id"] == "my-failure" and d["results"][0]["evidence"][0]["line"] == 2
    (tmp_path / ".shmguard.toml").write_text('[explain]\nsignatures = ["sigs"]\n')
    r = run("--json", str(log), cwd=tmp_path)
    assert json.loads(r.stdout)["results"][0]["id"] == "my-failure" and r.returncode == 1
    (sigs / "mine.toml").write_text(
        USER_SIG.replace(
            'literal = "my special failure"', 'literal = "my special failure"\nregex = "(oops"'
        )
    )
    r = run(str(log), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode() == (
        f"shmguard: error: {sigs / 'mine.toml'}: patterns[0].regex: invalid regular expression: "
        "missing ), unterminated subpattern at position 0\n"
    )


@pytest.mark.timeout(60)
def test_command_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, shmguard.cli.explain; print(sorted(m for m in "
        "('shmguard.triage', 'rich.console', 'torch') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True)
    assert r.stdout.strip() == b"[]"


def _all_logs() -> list[tuple[str, bytes]]:
    logs = [
        (c["id"], c["log"].encode())
        for c in map(json.loads, (FIXTURES / "public_reports.jsonl").read_text().splitlines())
    ]
    logs += [
        (p.name, p.read_bytes())
        for p in sorted(FIXTURES.rglob("*"))
        if p.suffix in (".txt", ".log")
    ]
    return logs


@pytest.mark.timeout(120)
def test_schema_validates_every_fixture(catalogue: Sequence[Signature]) -> None:
    for name, data in _all_logs():
        for runtime in (None, "kubernetes", "app"):
            d = explain_streams([(name, io.BytesIO(data))], signatures=catalogue, runtime=runtime)
            doc: Any = json.loads(json.dumps(envelope("explain", json_body(d))))
            SCHEMA.validate(doc)


def test_runtime_aliases_are_accepted(tmp_path: Path) -> None:
    log = tmp_path / "bus.log"
    log.write_text(
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory. Please try to raise "
        "your shared memory limit.\n"
    )
    for alias in ("k8s", "K8S", "kube"):
        done = subprocess.run(
            [sys.executable, "-m", "shmguard", "explain", "--json", "--runtime", alias, str(log)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        data = json.loads(done.stdout)
        assert data["runtime"] == "kubernetes"

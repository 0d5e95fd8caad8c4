"""Every command that prints JSON (``--json`` or ``--format json``) is run as a user runs it and
its output validated against its packaged schema, the references to common.schema.json resolved
(tests/schema_registry.py); the list of commands covered is the app's own, so a new JSON
command cannot be forgotten. The schemas share their definitions and copy none."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import typer

from schema_registry import names, registry, schema, validator
from shmguard.cli import app

TESTS = Path(__file__).resolve().parents[1]
LOGS = TESTS / "fixtures" / "logs"
CHECK_FIXTURES = TESTS / "lint" / "config" / "fixtures"
RECORDED = TESTS / "fixtures" / "prometheus" / "rightsize.json"
# A job that writes 1 MiB to /dev/shm and exits 0.
JOB = ["--", "sh", "-c", "head -c 1048576 /dev/zero > /dev/shm/x"]
ROOT = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a private /dev/shm)"),
]
SEED = ["--batch-size", "32", "--sample-shape", "3,224,224", "--dtype", "float32"]


def shmguard(*args: str, ok: tuple[int, ...] = (0,), **env: str) -> dict[str, Any]:
    """``python -m shmguard ARGS``, its exit status checked; the JSON it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "200", **env},
        check=False,
    )
    assert done.returncode in ok, (args, done.returncode, done.stderr)
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def json_commands() -> set[str]:
    """The commands of the Typer app with a ``--json`` flag or a ``--format`` that has json."""
    group: Any = typer.main.get_command(app)
    ctx = group.context_class(group)
    found = set()
    for name in group.list_commands(ctx):
        for p in group.get_command(ctx, name).params:
            choices = getattr(p.type, "choices", None) or ()
            if "--json" in p.opts or ("--format" in p.opts and "json" in choices):
                found.add(name)
    return found


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    """A loopback HTTP server answering Prometheus's /api/v1/query from the recording of a
    real Prometheus scraping real exporters (tests/fixtures/prometheus/rightsize.json); a
    query the recording lacks gets the empty vector."""
    answers = json.loads(RECORDED.read_text())["answers"]
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}

    class Replay(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            body = json.dumps(answers.get(query.get("query", [""])[0], empty)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


Docs = list[dict[str, Any]]


def _check(_tmp: Path, _prom: str) -> Docs:
    return [
        shmguard("check", "--json", str(CHECK_FIXTURES), ok=(1,)),
        shmguard("check", "--format", "json", str(CHECK_FIXTURES / "pod_good.yaml")),
    ]


def _doctor(_tmp: Path, _prom: str) -> Docs:
    return [shmguard("doctor", "--json", "--fail-on", "never")]


def _explain(_tmp: Path, _prom: str) -> Docs:
    logs = [str(LOGS / "oom_then_shm.log"), str(LOGS / "nothing_known.log")]
    one = shmguard("explain", "--json", logs[0], ok=(1,))
    return [one, shmguard("explain", "--per-file", "--json", *logs, ok=(1,))]


def _plan(_tmp: Path, _prom: str) -> Docs:
    args = [*SEED, "--num-workers", "4", "--format", "json"]
    return [shmguard("plan", *args), shmguard("plan", *args, "--check", "--max-workers", ok=(0, 1))]


def _rules(_tmp: Path, _prom: str) -> Docs:
    return [shmguard("rules", "--json")]


def _recommend(tmp: Path, prom: str) -> Docs:
    args = ["--prometheus", prom, "--window", "5m", "--min-samples", "1", "--json"]
    manifest = tmp / "pod.yaml"
    manifest.write_bytes((CHECK_FIXTURES / "pod_good.yaml").read_bytes())
    with_manifests = shmguard("recommend", *args, "--manifests", str(manifest))
    assert with_manifests["manifests"]["files"][0]["file"] == str(manifest)
    return [shmguard("recommend", *args, "--patches", str(tmp / "patches")), with_manifests]


def _watch(tmp: Path, _prom: str) -> Docs:
    (tmp / "dev" / "shm").mkdir(parents=True)
    root = ["--container-root", str(tmp), "--interval", "0.1"]
    return [shmguard("watch", *root, "--once", "--json", ok=(0, 1))]


def _sandbox(_tmp: Path, _prom: str) -> Docs:
    return [shmguard("sandbox", "--shm-size", "8m", "--json", *JOB)]


def _measure(_tmp: Path, _prom: str) -> Docs:
    return [shmguard("measure", "--json", *JOB)]


def _probe(_tmp: Path, _prom: str) -> Docs:
    return [shmguard("probe", "--confirm", "1", "--json", *JOB)]


def _tune(_tmp: Path, _prom: str) -> Docs:
    if find_spec("torch") is None:
        pytest.skip("needs PyTorch")
    path = os.pathsep.join([str(TESTS / "torch_tune"), *filter(None, sys.path)])
    args = ["--loader", "tune_factories:small", "--budget-shm", "6m", "--local-ranks", "2"]
    return [shmguard("tune", *args, "--cpus", "1", "--steps", "5", "--json", PYTHONPATH=path)]


#: Each JSON command: how this test runs it (the documents it printed, each checked against
#: the command's schema) and its markers.
CASES: dict[str, tuple[Callable[[Path, str], Docs], list[Any]]] = {
    "check": (_check, []),
    "doctor": (_doctor, []),
    "explain": (_explain, []),
    "plan": (_plan, []),
    "rules": (_rules, []),
    "recommend": (_recommend, []),
    "watch": (_watch, []),
    "sandbox": (_sandbox, ROOT),
    "measure": (_measure, ROOT),
    "probe": (_probe, ROOT),
    "tune": (_tune, [*ROOT, pytest.mark.torch, pytest.mark.slow, pytest.mark.timeout(240)]),
}


def test_every_json_command_is_covered() -> None:
    assert set(CASES) == json_commands()


@pytest.mark.parametrize(
    "command", [pytest.param(c, marks=marks, id=c) for c, (_, marks) in CASES.items()]
)
def test_output_validates_against_its_schema(command: str, tmp_path: Path, prometheus: str) -> None:
    run, _ = CASES[command]
    docs = run(tmp_path, prometheus)
    check = validator(command)
    for doc in docs:
        assert doc["schema"] == f"shmguard.{command}/1"
        check.validate(doc)


def test_every_command_schema_exists_and_says_its_envelope() -> None:
    for command in json_commands():
        s = schema(command)
        assert s["$id"] == f"https://shmguard.dev/schemas/{command}.schema.json"
        assert s["properties"]["schema"] == {"const": f"shmguard.{command}/1"}
    assert set(names()) == json_commands() | {"common"}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_no_definition_is_copied() -> None:
    """A ``$defs`` name lives in one schema file; the others refer to it."""
    where: dict[str, list[str]] = {}
    for n in names():
        for d in schema(n).get("$defs", {}):
            where.setdefault(d, []).append(n)
    copied = {d: files for d, files in where.items() if len(files) > 1}
    assert copied == {}
    # nor under another name: no two files hold a definition of the same content
    bodies: dict[str, set[str]] = {}
    for n in names():
        for body in schema(n).get("$defs", {}).values():
            bodies.setdefault(json.dumps(body, sort_keys=True), set()).add(n)
    assert [files for files in bodies.values() if len(files) > 1] == []


def test_every_reference_resolves() -> None:
    """Each ``$ref`` points at a definition that exists (an unused or misspelt one fails here
    rather than when a document first reaches it)."""
    reg = registry()
    for n in names():
        base = schema(n)["$id"]
        resolver = reg.resolver(base_uri=base)
        for ref in _refs(schema(n)):
            resolver.lookup(ref)  # raises referencing.exceptions.Unresolvable
    common = set(schema("common")["$defs"])
    used = {r.rsplit("/", 1)[1] for n in names() for r in _refs(schema(n)) if "common" in r}
    used |= {r.rsplit("/", 1)[1] for r in _refs(schema("common"))}
    assert common == used

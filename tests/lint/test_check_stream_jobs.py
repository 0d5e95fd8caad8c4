"""One big Kubernetes stream checked in several processes (``check --jobs``,
:mod:`shmguard.lint.check_stream_jobs`, issue 24 item 3(c)): cut at document start markers,
each part composed with the positions of the whole file, the findings byte for byte those of
the serial check in every format, and the whole-file check whenever a part cannot be
streamed."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from config.test_check_jobs import _run
from test_check_stream import DEPENDENT
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.config import Config
from shmguard.lint import check, check_stream_jobs
from shmguard.lint.check import CheckOptions, check_loaded, check_stream
from shmguard.lint.check_files import (
    BYTES_PER_JOB,
    STREAM_JOBS_AUTO,
    check_files,
    stream_jobs_for,
    usable_cpus,
)
from shmguard.render.json import to_data
from shmguard.sources import load, yamlload
from shmguard.sources.load import load_bytes
from shmguard.sources.text import SourceText
from shmguard.sources.yamlload import LOADER, Part, cut_documents, iter_documents, iter_part

ROOT = Path(__file__).resolve().parents[2]
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="--jobs uses fork, on Linux only"
)

#: Documents of several kinds, each with findings (or none), comments, non-ASCII text, a
#: block scalar, flow collections, an empty document and a plain mapping that is no object.
DOCS = [
    'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{i}\n  annotations: {{note: "é€😀"}}\n'
    "spec:\n  containers:\n  - name: c\n    image: pytorch/pytorch:2.3.0\n"
    "    resources: {{limits: {{memory: 8Gi}}}}\n",
    "# a Deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d-{i}}}\nspec:\n"
    "  template:\n    spec:\n      containers:\n      - name: t\n"
    "        image: vllm/vllm-openai:v0.4.0\n        args: [--tensor-parallel-size, '2']\n"
    "      volumes:\n      - name: dshm\n        emptyDir: {{medium: Memory}}\n",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  script: |\n"
    "    --- not a marker: indented\n    python train.py\n",
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j-{i}\nspec:\n  template:\n"
    "    spec:\n      restartPolicy: Never\n      containers:\n"
    "      - name: w  # shmguard: ignore[SHM001]\n        image: pytorch/pytorch:2.3.0\n"
    "        command: [torchrun, train.py]\n",
    "",
    "just: a mapping\nnot: [an, object]\n",
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q-{i}\nspec:\n  containers:\n"
    "  - name: c\n    image: pytorch/pytorch:2.3.0\n    volumeMounts:\n"
    "    - {{name: dshm, mountPath: /dev/shm}}\n  volumes:\n  - name: dshm\n"
    "    emptyDir: {{medium: Memory, sizeLimit: 64Mi}}\n",
]


def _stream(count: int, head: str = "# a stream\n") -> str:
    return head + "".join(
        f"---\n{DOCS[i % len(DOCS)].format(i=i)}" if i or head else DOCS[0].format(i=i)
        for i in range(count)
    )


def _marks(node: yaml.Node) -> Iterator[tuple[object, ...]]:
    stack = [node]
    while stack:
        n = stack.pop()
        s, e = n.start_mark, n.end_mark
        yield type(n).__name__, s.index, s.line, s.column, e.index, e.line, e.column
        if isinstance(n, yaml.MappingNode):
            stack.extend(x for pair in n.value for x in pair)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)


def _docs(docs: Iterator[yamlload.YamlDoc]) -> list[tuple[int, list[tuple[object, ...]]]]:
    return [(d.index, list(_marks(d.root.node)) if d.root else []) for d in docs]


def _each_cut(src: SourceText) -> Iterator[tuple[Part, ...]]:
    """The stream cut in two at each of its markers in turn."""
    text = src.text
    head = cut_documents(src, len(text))  # every marker a cut (fewer where they are close)
    assert head is not None
    for p in head[1:]:
        yield (Part(0, p.start, 0), Part(p.start, len(text), p.first))


@pytest.mark.parametrize(
    "text",
    [
        _stream(30),
        _stream(30, head=""),  # the first document has no marker
        _stream(12, head="# only comments\n\n  # and blanks\n").replace("\n", "\r\n"),
        "a: 1\n---\n---\nb: [1,\n  2]\n--- |\n  text\n---\n",  # empty ones, one on its marker
    ],
    ids=["marked", "implicit-first", "crlf", "empty-documents"],
)
def test_parts_compose_with_the_positions_of_the_whole_file(text: str) -> None:
    src = SourceText.decode(text.encode(), "s.yaml")
    assert isinstance(src, SourceText)
    whole = _docs(iter_documents(src, []))
    assert len(whole) == len(list(yaml.compose_all(text, Loader=LOADER)))
    cuts = list(_each_cut(src))
    assert cuts
    for parts in [*cuts, cut_documents(src, 3), cut_documents(src, 7)]:
        assert parts is not None
        diags: list[object] = []
        got = [d for p in parts for d in _docs(iter_part(src, p, diags))]  # type: ignore[arg-type]
        assert got == whole
        assert diags == []


@pytest.mark.parametrize(
    "text",
    [
        "%YAML 1.2\n---\na: 1\n---\nb: 2\n",
        "a: 1\n...\n---\nb: 2\n",
        "\ufeffa: 1\n---\nb: 2\n",
        "a: 1\r---\nb: 2\n---\nc: 3\n",
        "a: x\u2028y\n---\nb: 2\n",
        "a: 1\n",  # no marker
    ],
    ids=["directive", "document-end", "bom", "lone-cr", "line-separator", "one-document"],
)
def test_texts_libyaml_could_read_otherwise_are_not_cut(text: str) -> None:
    src = SourceText.decode(text.encode(), "s.yaml")
    assert isinstance(src, SourceText)
    assert cut_documents(src, 2) is None


def _result(data: bytes, jobs: int) -> object:
    got = check_stream(data, "s.yaml", jobs=jobs)
    return None if got is None else to_data(got)


@linux_only
def test_parts_in_processes_give_the_serial_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(check_stream_jobs, "BATCH", 3)  # several pickles a worker
    data = _stream(70).encode()
    serial = check_stream(data, "s.yaml", jobs=1)
    assert serial is not None
    assert serial == check_loaded(load_bytes(data, "s.yaml"))
    codes = {f.code for f in serial.findings}
    assert {"SHM001", "SHM007"} <= codes  # findings of several rules
    unsuppressed = data.replace(b"  # shmguard: ignore[SHM001]", b"")
    assert len(serial.findings) < len(check_stream(unsuppressed, "s.yaml", jobs=3).findings)
    for jobs in (2, 3, 8):
        parts = cut_documents(SourceText.decode(data, "s.yaml"), jobs)  # type: ignore[arg-type]
        assert parts is not None and len(parts) == jobs
        starts = [f.location.start for f in serial.findings if f.location]
        for p in parts[1:]:  # findings on both sides of every cut
            assert any(s < p.start for s in starts if s is not None)
            assert any(s > p.start for s in starts if s is not None)
        assert check_stream(data, "s.yaml", jobs=jobs) == serial


@linux_only
def test_a_cut_at_each_marker_gives_the_serial_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    data = _stream(len(DOCS) * 2).encode()
    serial = _result(data, 1)
    src = SourceText.decode(data, "s.yaml")
    assert isinstance(src, SourceText)
    cuts = list(_each_cut(src))
    assert len(cuts) == len(DOCS) * 2
    for parts in cuts:  # right before and after each document with findings
        monkeypatch.setattr(yamlload, "cut_documents", lambda s, n, parts=parts: parts)
        assert _result(data, 2) == serial


@linux_only
@pytest.mark.parametrize(
    ("extra", "why"), [*DEPENDENT, ('a: "quoted\n---\nb"\n', "a marker in a quoted scalar")]
)
def test_an_unstreamable_document_in_a_later_part_means_the_whole_file(
    monkeypatch: pytest.MonkeyPatch, extra: str, why: str
) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    data = (_stream(20) + "---\n" + extra + _stream(20)).encode()
    assert _result(data, 1) is None, why
    assert _result(data, 2) is None, why
    assert _result(data, 3) is None, why


@linux_only
def test_objects_in_one_part_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    plain = "".join(f"---\nn{i}: {i}\n" for i in range(200))
    data = (_stream(3) + plain).encode()
    assert _result(data, 1) is not None
    assert _result(data, 4) == _result(data, 1)
    none = ("# no object\n" + plain).encode()
    assert _result(none, 1) is None
    assert _result(none, 4) is None


@linux_only
def test_no_fork_checks_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    data = _stream(40).encode()
    serial = _result(data, 1)

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert _result(data, 3) == serial


@linux_only
def test_an_error_in_a_worker_is_raised_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    data = _stream(40).encode()
    parent = os.getpid()
    part = check._part

    def broken(*args: object) -> object:
        if os.getpid() != parent:
            raise ValueError("broken in the worker")
        return part(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "_part", broken)
    with pytest.raises(ValueError, match="broken in the worker") as err:
        check_stream(data, "s.yaml", jobs=2)
    assert any("in a check worker process" in n for n in err.value.__notes__)


def test_how_many_processes_check_a_stream() -> None:
    if not sys.platform.startswith("linux"):
        assert stream_jobs_for(4, 10**9) == 1
        return
    assert stream_jobs_for(3, 10) == min(3, usable_cpus())
    assert stream_jobs_for(10**6, 10) == usable_cpus()  # no more processes than CPUs
    assert stream_jobs_for(0, BYTES_PER_JOB - 1) == 1
    # automatic: at most STREAM_JOBS_AUTO (memory), whatever the machine's CPUs
    assert stream_jobs_for(0, 10**12) == min(STREAM_JOBS_AUTO, usable_cpus())


def test_files_checked_in_workers_do_not_fork_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "asked"

    def stream(data: bytes, path: str, options: object, *, config: object, jobs: int) -> None:
        with open(log, "a") as fh:  # from whichever process checks the file
            fh.write(f"{jobs}\n")

    def asked() -> list[int]:
        got = [int(x) for x in log.read_text().split()]
        log.unlink()
        return got

    monkeypatch.setattr(check, "check_stream", stream)
    paths = []
    for i in range(3):
        p = tmp_path / f"{i}.yaml"
        p.write_text(_stream(2))
        paths.append(str(p))
    args = {"fix": False, "diff": False, "unsafe": False, "keep_data": False}
    list(check_files(paths, CheckOptions(), Config(), jobs=1, stream_jobs=0, **args))
    list(check_files(paths, CheckOptions(), Config(), jobs=1, stream_jobs=2, **args))
    assert asked() == [1, 1, 1, 2, 2, 2]  # 0: automatic, one per 768 KiB
    got = check_files(paths, CheckOptions(), Config(), jobs=2, stream_jobs=2, **args)
    assert [c.result.path for c in got] == paths
    assert asked() == [1, 1, 1]


@linux_only
def test_cli_output_is_the_serial_output_in_every_format(tmp_path: Path) -> None:
    one = len(_stream(len(DOCS), head=""))
    count = (load.STREAM_MIN_BYTES // one + 1) * len(DOCS)
    path = tmp_path / "stream.yaml"
    path.write_text(_stream(count))
    data = path.read_bytes()
    assert len(data) >= load.STREAM_MIN_BYTES
    assert check_stream(data, str(path), jobs=2) is not None  # streamed, in parts
    for args in (
        ("--format", "json"),
        ("--format", "text"),
        ("--format", "sarif"),
        ("--format", "github"),
        ("--diff",),
    ):
        serial = _run("--jobs", "1", *args, "stream.yaml", cwd=tmp_path)
        assert serial[0] == 1 and serial[1], args
        for jobs in ("2", "3"):
            assert _run("--jobs", jobs, *args, "stream.yaml", cwd=tmp_path) == serial, args


@linux_only
def test_a_killed_worker_is_one_error_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a worker the OOM killer (here: SIGKILL) ends leaves the check incomplete: one line, exit 2
    # (1 would read as "findings"), no traceback
    monkeypatch.setattr(load, "STREAM_MIN_BYTES", 0)
    path = tmp_path / "s.yaml"
    path.write_text(_stream(40))
    parent = os.getpid()
    part = check._part

    def killed(*args: object) -> object:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return part(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "_part", killed)
    r = CliRunner().invoke(app, ["check", "--jobs", "2", str(path)])
    assert r.exit_code == 2, r.output
    assert re.fullmatch(
        r"shmguard: error: check worker \d+ ended \(killed by SIGKILL\) without its results\n",
        r.stderr,
    )

"""``shmguard check --jobs``: files checked in worker processes give byte for byte the output,
the stderr and the exit status of the serial run, in every format and with --diff, baselines
and unreadable files; --fix stays in one process and writes the same bytes."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from shmguard.config import Config
from shmguard.lint.check import CheckOptions
from shmguard.lint.check_files import (
    BYTES_PER_JOB,
    FILE_COST,
    FILES_PER_JOB,
    Checked,
    _forked,
    check_files,
    check_one,
    jobs_for,
)

HERE = Path(__file__).parent
CORPUS = HERE.parents[2] / ".." / "shared" / "corpus"
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="--jobs uses fork, on Linux only"
)


def _tree(root: Path) -> Path:
    """Corpus-like files: the rule fixtures (Compose, Kubernetes, run lines, ECS, daemon.json),
    a webhook configuration stream and files that cannot be read, twice over in subfolders."""
    for copy in ("a", "b"):
        for name in ("fixtures", "fixtures_rules_b"):
            shutil.copytree(HERE / name, root / copy / name)
        bad = root / copy / "bad"
        bad.mkdir()
        (bad / "invalid.yaml").write_text("services:\n  a: [1, 2\n")
        (bad / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
        (bad / "latin1.yml").write_bytes(b"services:\n  caf\xe9:\n    image: x\n")
        (bad / "helm.yaml").write_text("spec:\n  replicas: {{ .Values.replicas }}\n")
    return root


def _run(*args: str, cwd: Path) -> tuple[int, bytes, bytes]:
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", *args],
        cwd=cwd,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return r.returncode, r.stdout, r.stderr


@linux_only
@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--format", "json"),
        ("--format", "sarif"),
        ("--format", "github"),
        ("--diff", "--unsafe-fixes"),
        ("--select", "SHM001,SHM008", "--fail-on", "error"),
    ],
    ids=["text", "json", "sarif", "github", "diff", "select"],
)
def test_parallel_output_equals_serial(tmp_path: Path, args: tuple[str, ...]) -> None:
    tree = _tree(tmp_path / "files")
    serial = _run("--jobs", "1", *args, str(tree), cwd=tmp_path)
    parallel = _run("--jobs", "3", *args, str(tree), cwd=tmp_path)
    assert parallel == serial
    code, out, err = serial
    assert code == 2  # the unreadable files
    assert b"invalid.yaml" in err + out and b"SHM0" in out


@linux_only
def test_parallel_baselines_equal_serial(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "files")
    got = []
    for jobs in ("1", "2"):
        base = tmp_path / f"base{jobs}.json"
        made = _run("--jobs", jobs, "--create-baseline", str(base), str(tree), cwd=tmp_path)
        (tree / "a" / "fixtures" / "pod_bad.yaml").rename(tree / "a" / "fixtures" / "moved.yaml")
        used = _run("--jobs", jobs, "--baseline", str(base), str(tree), cwd=tmp_path)
        (tree / "a" / "fixtures" / "moved.yaml").rename(tree / "a" / "fixtures" / "pod_bad.yaml")
        got.append((made, used, base.read_bytes()))
    assert got[0] == got[1]
    assert b'"findings"' in got[0][2]


@linux_only
def test_fix_with_jobs_writes_what_the_serial_fix_writes(tmp_path: Path) -> None:
    trees = [_tree(tmp_path / "serial"), _tree(tmp_path / "parallel")]
    before = _tree(tmp_path / "before")
    runs = [
        _run("--jobs", jobs, "--fix", "--unsafe-fixes", ".", cwd=tree)
        for jobs, tree in zip(("1", "4"), trees, strict=True)
    ]
    assert runs[0] == runs[1] and b"fixed: " in runs[0][1]
    files = [sorted(p.relative_to(t) for p in t.rglob("*") if p.is_file()) for t in trees]
    assert files[0] == files[1]
    assert any((trees[0] / f).read_bytes() != (before / f).read_bytes() for f in files[0])
    assert all((trees[0] / f).read_bytes() == (trees[1] / f).read_bytes() for f in files[0])


@linux_only
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
def test_corpus_parallel_output_equals_serial(tmp_path: Path) -> None:
    for kind in ("compose", "k8s"):
        shutil.copytree(CORPUS / kind, tmp_path / "corpus" / kind)
    serial = _run("--jobs", "1", "--format", "json", "corpus", cwd=tmp_path)
    parallel = _run("--jobs", "0", "--format", "json", "corpus", cwd=tmp_path)
    assert parallel == serial
    assert json.loads(serial[1])["summary"]["files"] == len(
        list((tmp_path / "corpus").rglob("*.y*ml"))
    )


def test_jobs_for() -> None:
    many = [f"f{i}.yaml" for i in range(10 * FILES_PER_JOB)]
    assert jobs_for(4, many, fix=True) == 1  # fixes are written by one process
    assert jobs_for(4, [*many, "-"], fix=False) == 1  # standard input is this process's
    assert jobs_for(1, many, fix=False) == 1
    if sys.platform.startswith("linux"):
        assert jobs_for(4, many, fix=False) == 4
        assert jobs_for(8, ["a", "b", "c"], fix=False) == 3  # at most one per file
        assert jobs_for(0, many[: FILES_PER_JOB - 1], fix=False) == 1  # too few to share
        assert 1 <= jobs_for(0, many, fix=False) <= 10


@linux_only
def test_automatic_jobs_follow_the_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker costs more than a few hundred small files take: their bytes and FILE_COST each
    # must reach BYTES_PER_JOB per process
    import shmguard.lint.check_files as check_files_module

    monkeypatch.setattr(check_files_module, "usable_cpus", lambda: 4)

    def files(name: str, n: int, size: int) -> list[str]:
        (tmp_path / name).mkdir()
        for i in range(n):
            (tmp_path / name / f"{i}.yaml").write_bytes(b"#" * size)
        return [str(tmp_path / name / f"{i}.yaml") for i in range(n)]

    small = files("small", 256, 100)  # 256 * (100 + 2 KiB): 0.5 MiB
    assert 256 * (100 + FILE_COST) < BYTES_PER_JOB
    assert jobs_for(0, small, fix=False) == 1
    big = files("big", 256, 8192)  # 256 * 10 KiB: 2.5 MiB
    assert jobs_for(0, big, fix=False) == 256 * (8192 + FILE_COST) // BYTES_PER_JOB == 3
    assert jobs_for(0, big[:64], fix=False) == 1  # at most one per FILES_PER_JOB files too
    assert jobs_for(2, small, fix=False) == 2  # a number asked for is taken as it is


@linux_only
def test_workers_check_in_order_and_send_the_bytes_only_when_asked(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    paths = sorted(str(p) for p in tree.rglob("*") if p.is_file())
    opts, conf = CheckOptions(), Config()
    kw = {"fix": False, "diff": False, "unsafe": False}
    serial = list(check_files(paths, opts, conf, jobs=1, keep_data=True, **kw))
    lean = list(check_files(paths, opts, conf, jobs=2, keep_data=False, **kw))
    full = list(check_files(paths, opts, conf, jobs=2, keep_data=True, **kw))
    assert [c.result for c in lean] == [c.result for c in serial] == [c.result for c in full]
    assert [c.result.path for c in serial] == paths
    assert all(c.data is None for c in lean)  # from the workers, without the bytes
    assert [c.data for c in full] == [c.data for c in serial]
    assert any(c.data for c in serial)
    # however many processes check: the same values, the bytes only when asked for
    assert list(check_files(paths, opts, conf, jobs=1, keep_data=False, **kw)) == lean
    diffed = list(check_files(paths, opts, conf, jobs=2, keep_data=False, **{**kw, "diff": True}))
    assert any(c.fixed_data is not None for c in diffed)
    assert all((c.data is None) is (c.fixed_data is None) for c in diffed)  # kept to diff
    with pytest.raises(ValueError, match="--fix"):
        next(check_files(paths, opts, conf, jobs=2, keep_data=False, **{**kw, "fix": True}))


def _gated(tree: Path, fail: Callable[[], None]) -> tuple[Callable[[str], Checked], list[str]]:
    """A check of the fixtures that calls ``fail`` in a forked worker and, in this process,
    first waits until a worker has taken a chunk of the work queue (so one surely does)."""
    r, w = os.pipe()
    parent = os.getpid()

    def run(path: str) -> Checked:
        if os.getpid() != parent:
            os.write(w, b"x")
            fail()
        else:
            select.select([r], [], [], 60)  # stays readable once a worker has written
        return check_one(path, CheckOptions(), Config(), fix=False, diff=False, unsafe=False)

    return run, sorted(str(f) for f in tree.rglob("*.yaml"))


def _raise() -> None:
    raise LookupError("no such thing")


def _die() -> None:
    os._exit(3)


@linux_only
def test_a_worker_error_is_raised_here(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    run, paths = _gated(tree, _raise)
    with pytest.raises(LookupError, match="no such thing") as err:
        _forked(paths, 2, run)
    assert any("in a check worker process" in n for n in err.value.__notes__)
    run, paths = _gated(tree, _die)
    with pytest.raises(RuntimeError, match=r"ended \(exit status 3\) without its results"):
        _forked(paths, 2, run)
    run, paths = _gated(tree, lambda: None)
    serial = [
        check_one(p, CheckOptions(), Config(), fix=False, diff=False, unsafe=False) for p in paths
    ]
    assert _forked(paths, 3, run) == serial


@linux_only
def test_more_files_than_queue_places_keep_their_order(tmp_path: Path) -> None:
    # 9,000 paths make more than 1,024 chunks of 8: the chunks grow to fit the work queue
    paths = [str(tmp_path / f"missing-{i}.yaml") for i in range(9000)]
    kw = {"fix": False, "diff": False, "unsafe": False, "keep_data": False}
    got = list(check_files(paths, CheckOptions(), Config(), jobs=3, **kw))
    assert [c.result.path for c in got] == paths
    assert all("cannot read" in c.result.diagnostics[0].message for c in got)


_STUCK_WORKERS = """
import os, sys, time
from shmguard.lint.check_files import _forked

def run(path):
    open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
    time.sleep(60)

_forked([f"f{i}.yaml" for i in range(64)], 2, run)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@linux_only
def test_workers_end_when_this_process_is_killed(tmp_path: Path) -> None:
    # kill -TERM or -KILL of `shmguard check -j N` (this process alone, not its group): its
    # workers must not go on checking the rest of the queue as orphans
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-c", _STUCK_WORKERS, str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        (worker,) = {int(n) for n in os.listdir(tmp_path)} - {proc.pid}
        assert _running(worker)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(worker)
    finally:
        proc.kill()
        for name in os.listdir(tmp_path):
            if _running(int(name)):
                os.kill(int(name), signal.SIGKILL)


@linux_only
def test_more_jobs_than_descriptors_allow_still_check_every_file(tmp_path: Path) -> None:
    # -j 400 under `ulimit -n 64`: the pipes of the first ~60 workers use up the descriptors;
    # those check the files, with the serial output and no traceback
    import resource

    tree = _tree(tmp_path / "t")
    paths = [str(p) for p in sorted(tree.rglob("*")) if p.is_file()]
    paths = (paths * (400 // len(paths) + 1))[:400]

    def run(jobs: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "shmguard", "check", "-j", jobs, *paths],
            cwd=tmp_path,
            capture_output=True,
            timeout=300,
            check=False,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)),
        )

    many, one = run("400"), run("1")
    assert b"Traceback" not in many.stderr
    assert (many.returncode, many.stdout, many.stderr) == (one.returncode, one.stdout, one.stderr)
    # 400 files walked: 346 checked, 54 with errors (the fixtures' bad inputs)
    assert b"in 346 files; 54 files with errors (on stderr)" in one.stdout

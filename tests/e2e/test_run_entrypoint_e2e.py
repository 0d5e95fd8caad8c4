"""`shmguard run` as a real Docker container's entrypoint (issue 9, part 4): the ENTRYPOINT of
examples/entrypoint/Dockerfile refuses to start in Docker's default 64 MiB /dev/shm (exit 1,
with the Docker fix) and starts with ``--shm-size=2g``; ``run --watch`` as PID 1 diagnoses the
seed loader's real failure inside the container (``docker logs`` shows it) and exits with the
loader's status; ``docker stop`` reaches the command through it at once (exit 143).

The image: the rootfs of ``runtime_support`` imported, then ``docker build`` of a Dockerfile
``FROM`` it with the example's own ENTRYPOINT and CMD lines and a PATH/PYTHONPATH that find this
interpreter's venv (its ``shmguard`` script) and this checkout's sources, which are bind-mounted
read-only at the same paths with /usr, the interpreter and torch; the bundled examples at /job.
Containers run with ``--network none``. Skipped without a daemon, failed instead when
``SHMGUARD_E2E_REQUIRE`` names docker (``.ci/run`` starts one with ``.ci/dockerd.sh``).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_support import Runtime, docker, imported, unavailable

import shmguard
import shmguard.examples

pytestmark = [pytest.mark.docker, pytest.mark.torch, pytest.mark.slow]

EXAMPLE = Path(shmguard.examples.__file__).resolve().parent / "entrypoint" / "Dockerfile"
SOURCES = Path(shmguard.__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
JOB_TIMEOUT_S = 240


def _binds() -> list[str]:
    """``-v`` values: /usr, the interpreter's installation and venv, torch's and numpy's
    directories, this checkout's sources (same paths, read-only) and the examples at /job."""
    import numpy
    import torch

    roots = {"/usr", sys.base_prefix, sys.prefix, str(SOURCES)}
    for mod in (torch, numpy):
        roots.add(str(Path(mod.__file__ or "").resolve().parents[1]))
    kept = sorted(
        r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)
    )
    binds = [f"{r}:{r}:ro" for r in kept]
    binds.append(f"{Path(shmguard.examples.__file__).resolve().parent}:/job:ro")
    return [arg for b in binds for arg in ("-v", b)]


def _entry_lines() -> list[str]:
    """The example's ENTRYPOINT and CMD instructions, as written."""
    lines = [ln for ln in EXAMPLE.read_text().splitlines() if ln.startswith(("ENTRYPOINT", "CMD"))]
    assert [ln.split()[0] for ln in lines] == ["ENTRYPOINT", "CMD"], lines
    return lines


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, str]]:
    """(docker, the tag of the image built from the example's entrypoint lines)."""
    pytest.importorskip("torch")
    if not (VENV_BIN / "shmguard").is_file():
        unavailable("docker", f"no shmguard script next to {sys.executable} (pip install -e .)")
    rt = docker()
    tag = uuid.uuid4().hex[:12]
    with imported(rt, f"localhost/shmguard-e2e/rootfs:{tag}") as base:
        ctx = tmp_path_factory.mktemp("entrypoint-image")
        (ctx / "Dockerfile").write_text(
            "\n".join(
                [
                    f"FROM {base.image}",
                    f"ENV PATH={VENV_BIN}:/usr/local/bin:/usr/bin:/bin PYTHONPATH={SOURCES}",
                    *_entry_lines(),
                    "",
                ]
            )
        )
        built = f"localhost/shmguard-e2e/entrypoint:{tag}"
        rt.run("build", "-q", "-t", built, str(ctx), timeout=120)
        try:
            yield rt, built
        finally:
            subprocess.run(
                ["docker", "rmi", "-f", built], capture_output=True, timeout=60, env=rt.env
            )


def _docker(rt: Runtime, *args: str, timeout: float = JOB_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, env=rt.env, check=False
    )


def test_require_in_the_entrypoint_refuses_the_default_64_mib(image: tuple[Runtime, str]) -> None:
    rt, tag = image
    run = ["run", "--rm", "--network", "none", *_binds()]
    r = _docker(rt, *run, tag, "sh", "-c", "echo ran; df -k /dev/shm")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout == ""  # the command never started
    assert (
        "shmguard run: --require 1 GiB not met: /dev/shm has 64 MiB free, below the 1 GiB "
        "required (--require); not starting sh -c 'echo ran; df -k /dev/shm'"
    ) in r.stderr
    assert "docker run --shm-size=1536m IMAGE ..." in r.stderr  # the fix for Docker
    r = _docker(rt, *run, "--shm-size=2g", tag, "sh", "-c", "echo ran; df -k /dev/shm")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "ran"
    assert r.stdout.splitlines()[-1].split()[1] == str(2 * 1024 * 1024)  # 2 GiB in KiB


def test_watch_diagnoses_the_seed_loader_failure_in_docker_logs(image: tuple[Runtime, str]) -> None:
    rt, tag = image
    name = f"shmguard-e2e-{uuid.uuid4().hex[:8]}"
    loader = ["python", "/job/seed_loader.py", "--batches", "20", "--quiet", "--timeout", "30"]
    r = _docker(
        rt,
        *("run", "-d", "--name", name, "--network", "none", *_binds()),
        *("--entrypoint", "shmguard", tag, "run", "--watch", "--", *loader),
    )
    assert r.returncode == 0, r.stderr
    try:
        waited = _docker(rt, "wait", name)
        logs = _docker(rt, "logs", name)
    finally:
        _docker(rt, "rm", "-f", name, timeout=60)
    # The loader raises (DataLoader(timeout=30) also ends the rare silent hang): status 1.
    assert waited.stdout.strip() == "1", waited.stdout + waited.stderr
    assert logs.stdout.startswith("loading 20 batches of 18.4 MiB")  # stdout stays the job's
    err = logs.stderr
    report = err[err.index("shmguard run: python /job/seed_loader.py") :].splitlines()
    assert report[0].endswith("exited with status 1"), report
    assert report[1].startswith("/dev/shm: peak ") and " of 64 MiB (" in report[1]
    assert report[2].startswith(("outcome: shm-exhausted: ", "outcome: hang: "))
    assert "Runtime: docker (from the container shmguard runs in" in err
    assert "The log shows: /dev/shm size 64 MiB (line 1)" in err
    assert "[torch-shm-alloc-failed]" in err or "[dataloader-timeout]" in err
    assert "docker run --shm-size=" in err


def test_docker_stop_reaches_the_command_through_shmguard_as_pid_1(
    image: tuple[Runtime, str],
) -> None:
    rt, tag = image
    name = f"shmguard-e2e-{uuid.uuid4().hex[:8]}"
    r = _docker(
        rt,
        *("run", "-d", "--name", name, "--network", "none", *_binds()),
        *("--entrypoint", "shmguard", tag, "run", "--brief", "--watch", "--", "sleep", "600"),
    )
    assert r.returncode == 0, r.stderr
    try:
        # Wait for the command itself: shmguard holds SIGTERM only from its first lines on.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # (docker top needs the pid column; the command is the rest of the line)
            rows = _docker(rt, "top", name, "-o", "pid,args").stdout.splitlines()[1:]
            top = [row.split(None, 1)[1] for row in rows if len(row.split(None, 1)) == 2]
            if "sleep 600" in top:
                break
            time.sleep(0.2)
        assert "sleep 600" in top and any(
            a.endswith("shmguard run --brief --watch -- sleep 600") for a in top
        ), top
        started = time.monotonic()
        # Without forwarding, PID 1 would ignore SIGTERM and Docker would SIGKILL it after 20 s.
        stop = _docker(rt, "stop", "-t", "20", name)
        assert stop.returncode == 0, stop.stderr
        assert time.monotonic() - started < 10
        assert _docker(rt, "wait", name).stdout.strip() == "143"  # 128 + SIGTERM, sleep's
    finally:
        _docker(rt, "rm", "-f", name, timeout=60)

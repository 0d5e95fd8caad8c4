"""deploy/docker: a second container joined to a job's IPC and PID namespaces, as the exporter is
(``--ipc container:NAME --pid container:NAME``), sees the job's /dev/shm and processes; Docker's
default private IPC refuses to be joined.

A real Docker daemon (``.ci/dockerd.sh``) and the rootfs of ``runtime_support`` imported as the
image; /usr, this interpreter's installation and venv and this checkout's sources are
bind-mounted read-only at the same paths, so ``python -m shmguard doctor --json`` runs inside the
joined container. Every container runs with ``--network none`` and is removed afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_support import Runtime, docker, imported

import shmguard

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SOURCES = Path(shmguard.__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "docker" / "run-with-exporter.sh"
MIB = 1 << 20
WRITTEN = 10 * MIB


def binds() -> list[str]:
    roots = {"/usr", sys.base_prefix, sys.prefix, str(SOURCES)}
    kept = sorted(
        r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)
    )
    return [arg for r in kept for arg in ("-v", f"{r}:{r}:ro")]


@pytest.fixture(scope="module")
def rt() -> Iterator[Runtime]:
    with imported(docker(), f"localhost/shmguard-e2e/ipc:{uuid.uuid4().hex[:12]}") as runtime:
        yield runtime


def run(rt: Runtime, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=120, env=rt.env, check=False
    )


@pytest.fixture
def job(rt: Runtime) -> Iterator[str]:
    """A job container with a shareable IPC namespace and a 64 MiB /dev/shm holding a 10 MiB
    file; yields its name once the file is written."""
    name = f"shmguard-e2e-job-{uuid.uuid4().hex[:8]}"
    fill = f"head -c {WRITTEN} /dev/zero > /dev/shm/torch_fill && touch /tmp/ready; exec sleep 300"
    r = run(rt, "run", "-d", "--name", name, "--network", "none", "--ipc=shareable",
            "--shm-size=64m", *binds(), rt.image, "sh", "-c", fill)  # fmt: skip
    assert r.returncode == 0, r.stderr
    try:
        for _ in range(100):
            if run(rt, "exec", name, "test", "-e", "/tmp/ready").returncode == 0:
                break
            time.sleep(0.1)
        yield name
    finally:
        run(rt, "rm", "-f", name)


def test_a_container_joined_with_ipc_container_sees_the_jobs_dev_shm(rt: Runtime, job: str) -> None:
    joined = ["run", "--rm", "--network", "none", "--ipc", f"container:{job}"]
    joined += ["--pid", f"container:{job}", *binds(), rt.image]
    look = "df -B1 --output=size,used /dev/shm | tail -1; cat /proc/1/cmdline"
    r = run(rt, *joined, "sh", "-c", look)
    assert r.returncode == 0, r.stderr
    figures, cmdline = r.stdout.split("\n", 1)
    assert [int(x) for x in figures.split()] == [64 * MIB, WRITTEN]
    assert cmdline.split("\0")[:2] == ["sleep", "300"]  # PID 1 there is the job's process
    shmguard_cli = [sys.executable, "-m", "shmguard", "doctor", "--json"]
    r = run(rt, *joined[:-1], "-e", f"PYTHONPATH={SOURCES}", rt.image, *shmguard_cli)
    assert r.returncode == 0, r.stderr
    shm = json.loads(r.stdout)["facts"]["shm"]
    assert (shm["fstype"], shm["total"], shm["used"]) == ("tmpfs", 64 * MIB, WRITTEN)
    assert (shm["named_files"], shm["named_bytes"]) == (1, WRITTEN)
    # without joining, a container's /dev/shm is its own, empty one
    r = run(rt, "run", "--rm", "--network", "none", *binds(), rt.image,
            "df", "-B1", "--output=used", "/dev/shm")  # fmt: skip
    assert r.returncode == 0 and r.stdout.split()[-1] == "0", r.stdout + r.stderr


def test_dockers_default_private_ipc_refuses_to_be_joined(rt: Runtime) -> None:
    name = f"shmguard-e2e-private-{uuid.uuid4().hex[:8]}"
    r = run(
        rt, "run", "-d", "--name", name, "--network", "none", *binds(), rt.image, "sleep", "300"
    )
    assert r.returncode == 0, r.stderr
    try:
        mode = run(rt, "inspect", "-f", "{{.HostConfig.IpcMode}}", name).stdout.strip()
        assert mode == "private"  # the daemon's default-ipc-mode
        cid = run(rt, "inspect", "-f", "{{.Id}}", name).stdout.strip()
        r = run(rt, "run", "--rm", "--network", "none", "--ipc", f"container:{name}",
                *binds(), rt.image, "true")  # fmt: skip
        assert r.returncode == 125
        assert (
            f"Error response from daemon: can't join IPC of container {cid}: non-shareable IPC "
            "(hint: use IpcMode:shareable for the donor container)"
        ) in r.stderr
    finally:
        run(rt, "rm", "-f", name)


def test_the_example_script_uses_the_flags_tested_here() -> None:
    text = SCRIPT.read_text()
    assert 'docker run -d --name "$NAME" --ipc=shareable' in text
    assert '--ipc "container:$NAME" --pid "container:$NAME"' in text
    assert "shmguard exporter --listen 0.0.0.0:9808" in text
    r = subprocess.run(["sh", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr

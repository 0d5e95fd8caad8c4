"""End to end through a real Docker daemon (issue 8, "Done when"): a real PyTorch DataLoader job
in a real ``docker run`` line fails in Docker's 64 MiB default /dev/shm, ``shmguard check``
flags the line, ``shmguard check --fix`` rewrites it, and the rewritten line runs the job to
completion.

Needs a Docker daemon the ``docker`` CLI can reach (``DOCKER_HOST`` or the default socket);
``.ci/run`` starts one with ``.ci/dockerd.sh`` (Debian docker.io, dockerd 20.10, no network).
Without a daemon the test is skipped, unless ``SHMGUARD_E2E_REQUIRE`` names ``docker`` (as
``.ci/run`` sets it), where it fails instead. Select it with ``pytest -m docker``.

No registry is reachable: the image is ``docker import`` of a rootfs of a few kilobytes
(directories, the merged-/usr symlinks, /etc/ld.so.cache, passwd), and the host's /usr, this
interpreter's base installation, its venv and the bundled examples are bind-mounted read-only
at the same paths. Containers run with ``--network none``. The job is the seed loader
(examples/seed_loader.py: 3x224x224 float32, batch 32 = 18.4 MiB, 4 workers x prefetch 2,
peak about 165 MiB), which crashes in 64 MiB with ``unable to allocate shared memory(shm)``
or, on about 5% of runs, hangs (../shared/research/torch_shm.md section 2, S01); the job's
``DataLoader(timeout=30)`` turns a hang into ``DataLoader timed out``.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import shmguard.examples

pytestmark = [pytest.mark.docker, pytest.mark.torch, pytest.mark.slow]

#: The image name carries "pytorch": the evidence SHM001 finds on the line (an ML image).
IMAGE = "shmguard-e2e/pytorch-cpu"
#: Texts of a DataLoader that ran out of /dev/shm: the allocation error (errno 28), the SIGBUS
#: of torch before posix_fallocate, and the DataLoader timeout that ends a feeder-thread hang.
SHM_FAILURES = (
    "unable to allocate shared memory",
    "No space left on device",
    "Bus error",
    "DataLoader timed out",
)
JOB_TIMEOUT_S = 240


def _required() -> bool:
    return "docker" in os.environ.get("SHMGUARD_E2E_REQUIRE", "").split(",")


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason} (SHMGUARD_E2E_REQUIRE=docker)")
    pytest.skip(reason)


def _docker(*args: str, timeout: float = 60, stdin: bytes | None = None) -> str:
    r = subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    if r.returncode != 0:
        raise RuntimeError(f"docker {args[0]} failed ({r.returncode}): {r.stderr.decode()}")
    return r.stdout.decode()


def _rootfs_tar() -> bytes:
    """A tar of a rootfs with no files but ld.so.cache: everything else is bind-mounted."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(
            name: str,
            *,
            mode: int = 0o755,
            kind: bytes = tarfile.DIRTYPE,
            data: bytes = b"",
            link: str = "",
        ) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        for d in ("etc", "proc", "sys", "dev", "root", "usr", "run", "var"):
            add(d)
        add("tmp", mode=0o1777)
        for name in ("bin", "lib", "lib64", "sbin"):
            add(name, kind=tarfile.SYMTYPE, link=f"usr/{name}")
        files = {
            "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n",
            "etc/group": b"root:x:0:\n",
            "etc/ld.so.cache": Path("/etc/ld.so.cache").read_bytes(),
        }
        for name, data in files.items():
            add(name, mode=0o644, kind=tarfile.REGTYPE, data=data)
    return buf.getvalue()


def _binds() -> list[str]:
    """Read-only binds at the same paths: /usr, the interpreter's installation and venv, the
    directories torch and numpy come from, and the bundled examples (mounted at /job)."""
    import numpy
    import torch

    roots = {"/usr", sys.base_prefix, sys.prefix}
    for mod in (torch, numpy):
        roots.add(str(Path(mod.__file__ or "").resolve().parents[1]))
    kept = sorted(
        r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)
    )
    binds = [f"{r}:{r}:ro" for r in kept]
    binds.append(f"{Path(shmguard.examples.__file__).resolve().parent}:/job:ro")
    return binds


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """Import the rootfs as a fresh image tag; removed afterwards."""
    if shutil.which("docker") is None:
        _unavailable("the docker CLI is not installed (.ci/run installs docker.io)")
    pytest.importorskip("torch")
    try:
        _docker("version", "--format", "{{.Server.Version}}", timeout=20)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        _unavailable(
            f"no Docker daemon reachable (DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}); "
            f"start one as .ci/dockerd.sh does: {str(e).strip()[:200]}"
        )
    tag = f"{IMAGE}:{uuid.uuid4().hex[:12]}"
    _docker("import", "-", tag, stdin=_rootfs_tar())
    try:
        yield tag
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=60, check=False)


def _script(tag: str, name: str) -> str:
    lines = [
        "#!/bin/sh",
        "# Train: the seed DataLoader (4 workers, 18.4 MiB batches) in a container.",
        "set -e",
        f"docker run --rm --name {name} --network none \\",
        *(f"  -v {shlex.quote(b)} \\" for b in _binds()),
        f"  {tag} \\",
        f"  {shlex.quote(sys.executable)} /job/seed_loader.py --batches 20 --timeout 30 --quiet",
        "",
    ]
    return "\n".join(lines)


def _run_job(script: Path, name: str) -> tuple[int, str]:
    """Run the script; on a timeout kill the container (by its --name) and fail."""
    try:
        r = subprocess.run(
            ["sh", str(script)], capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        subprocess.run(["docker", "kill", name], capture_output=True, timeout=60, check=False)
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(
            f"the job ran past {JOB_TIMEOUT_S} s (a hang the DataLoader timeout missed):\n{out}"
        )
    return r.returncode, r.stdout + r.stderr


def _shmguard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_docker_run_line_fails_at_64m_is_flagged_fixed_and_then_runs(
    image: str, tmp_path: Path
) -> None:
    name = f"shmguard-e2e-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "train.sh"
    original = _script(image, name)
    script.write_text(original)
    run_line = 4  # the `docker run` line of _script

    # 1. Docker's default /dev/shm (64 MiB): the job dies of it.
    rc, out = _run_job(script, name)
    assert rc != 0, f"the job passed in 64 MiB:\n{out}"
    seen = [t for t in SHM_FAILURES if t in out]
    assert seen, f"the job failed, but not of /dev/shm (rc {rc}):\n{out}"

    # 2. check flags the line: SHM001 at the `docker` word, with a safe fix.
    r = _shmguard("check", "--json", str(script))
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    (entry,) = doc["files"]
    assert entry["kind"] == "run-lines"
    (finding,) = entry["findings"]
    assert finding["code"] == "SHM001"
    assert (finding["location"]["line"], finding["location"]["column"]) == (run_line, 1)
    assert finding["location"]["end_column"] == 1 + len("docker")
    assert finding["fix"]["applicability"] == "safe"
    assert finding["fix"]["changes"] == [
        {"setting": "shm-size", "value": 1 << 30, "runtimes": ["docker"]}
    ]

    # 3. check --fix rewrites only that line, and a second check finds nothing.
    r = _shmguard("check", "--fix", str(script))
    assert r.returncode == 0, r.stdout + r.stderr
    fixed = script.read_text()
    assert fixed == original.replace("docker run --rm", "docker run --shm-size=1g --rm", 1)
    r = _shmguard("check", str(script))
    assert r.returncode == 0, r.stdout + r.stderr

    # 4. The rewritten line runs the job to completion.
    rc, out = _run_job(script, name)
    assert rc == 0, f"the fixed job failed (rc {rc}):\n{out}"
    assert "done: 20 batches" in out, out
    assert not [t for t in SHM_FAILURES if t in out], out

"""What the end-to-end tests share: the container CLIs (Docker through its daemon, Podman with a
private ``CONTAINERS_CONF`` / ``CONTAINERS_STORAGE_CONF`` under a temp directory), the rootfs
imported as the image, skipping or failing when a runtime is unavailable
(``SHMGUARD_E2E_REQUIRE``), running a script with a timeout, and ``python -m shmguard``.

Podman (Debian ``podman`` 4.3) needs no daemon: its config is ``default_ulimits = []``,
cgroupfs and file events, its storage vfs under the temp directory, so nothing outside that
directory is touched and ``podman system reset`` removes it all afterwards. On a host whose
cgroups are hybrid (v1 controllers, and a cgroup2 at /sys/fs/cgroup/unified that still has a
controller of its own, such as hugetlb), Podman's default OCI runtime crun refuses every
container ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"); runc
runs there, so the config names runc on such a host when it is installed (Debian's docker.io
brings it).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


def required(runtime: str) -> bool:
    """Whether ``SHMGUARD_E2E_REQUIRE`` (comma-separated) names ``runtime``."""
    return runtime in os.environ.get("SHMGUARD_E2E_REQUIRE", "").split(",")


def unavailable(runtime: str, reason: str) -> None:
    """Skip the test, or fail it when ``SHMGUARD_E2E_REQUIRE`` names ``runtime``."""
    if required(runtime):
        pytest.fail(f"{reason} (SHMGUARD_E2E_REQUIRE names {runtime})")
    pytest.skip(reason)


@dataclass
class Runtime:
    """A container CLI, the environment it runs in, and the image imported for the test."""

    cli: str
    env: dict[str, str]
    image: str = ""
    #: the default /dev/shm size SHM001's message names (moby config.DefaultShmSize; Podman's
    #: containers.conf shm_size = "65536k")
    default_shm: str = ""

    def run(self, *args: str, timeout: float = 60, stdin: bytes | None = None) -> str:
        """``cli args...``'s stdout; RuntimeError (with its stderr) on a non-zero exit."""
        r = subprocess.run(
            [self.cli, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )
        if r.returncode != 0:
            raise RuntimeError(f"{self.cli} {args[0]} failed ({r.returncode}): {r.stderr.decode()}")
        return r.stdout.decode()


def rootfs_tar() -> bytes:
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


def docker() -> Runtime:
    """The ``docker`` CLI with the caller's environment; skips (or fails) without a daemon."""
    rt = Runtime("docker", dict(os.environ), default_shm="64 MiB")
    try:
        rt.run("version", "--format", "{{.Server.Version}}", timeout=20)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        unavailable(
            "docker",
            f"no Docker daemon reachable (DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}); "
            f"start one as .ci/dockerd.sh does: {str(e).strip()[:200]}",
        )
    return rt


def _hybrid_cgroups(root: Path = Path("/sys/fs/cgroup")) -> bool:
    """Whether cgroups are hybrid with a controller left on the cgroup2 side (crun's refusal)."""
    try:
        return bool((root / "unified" / "cgroup.controllers").read_text().split())
    except OSError:
        return False


def podman(root: Path) -> Runtime:
    """``podman`` with its config and vfs storage under ``root``; skips (or fails) when it
    does not run."""
    conf, storage = root / "containers.conf", root / "storage.conf"
    engine = '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
    if _hybrid_cgroups() and shutil.which("runc"):
        engine += 'runtime = "runc"\n'
    conf.write_text("[containers]\ndefault_ulimits = []\n" + engine)
    storage.write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n'
    )
    env = dict(os.environ, CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage))
    rt = Runtime("podman", env, default_shm="65,536,000 bytes")
    try:
        rt.run("info", "--format", "{{.Version.Version}}", timeout=60)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        unavailable("podman", f"podman does not run here: {str(e).strip()[:300]}")
    return rt


@contextmanager
def imported(rt: Runtime, image: str) -> Iterator[Runtime]:
    """``rt`` with :func:`rootfs_tar` imported as ``image``; the image (and, for Podman, its
    whole storage) removed on exit."""
    rt.image = image
    rt.run("import", "-", rt.image, stdin=rootfs_tar())
    try:
        yield rt
    finally:
        subprocess.run(
            [rt.cli, "rmi", "-f", rt.image],
            capture_output=True,
            timeout=60,
            env=rt.env,
            check=False,
        )
        if rt.cli == "podman":
            subprocess.run(
                ["podman", "system", "reset", "--force"],
                capture_output=True,
                timeout=120,
                env=rt.env,
                check=False,
            )


def run_script(
    rt: Runtime, script: Path, name: str, timeout_s: float, hint: str = ""
) -> tuple[int, str]:
    """Run ``sh script``: (exit status, stdout + stderr). On a timeout kill the container (by
    its ``--name``) and fail the test (``hint`` follows the timeout in the message)."""
    try:
        r = subprocess.run(
            ["sh", str(script)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=rt.env,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        subprocess.run([rt.cli, "kill", name], capture_output=True, timeout=60, env=rt.env)
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the job ran past {timeout_s} s{hint}\n{out}")
    return r.returncode, r.stdout + r.stderr


def shmguard_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m shmguard args...`` with this interpreter (text output, never raises)."""
    return subprocess.run(
        [sys.executable, "-m", "shmguard", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

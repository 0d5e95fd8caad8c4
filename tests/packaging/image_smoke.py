"""Build the shmguard image with deploy/image/build.sh and run it as shipped, in the Docker
daemon .ci/run starts (.ci/dockerd.sh: no bridge, so every container runs with --network none).

    python tests/packaging/image_smoke.py                 # base made here with debootstrap
    python tests/packaging/image_smoke.py --base IMAGE    # an existing local Python image

Steps, each timed:

1. the base: unless --base is given, ``debootstrap --variant=minbase
   --include=python3,python3-venv,python3-pip bookworm`` (installed with apt-get if missing)
   from the Debian mirror this machine's apt uses, then ``docker import`` as
   shmguard-ci-base:bookworm;
2. ``deploy/image/build.sh --base BASE`` (the one script users build with);
3. in the image, every container with --network none, --read-only, --cap-drop ALL,
   no-new-privileges and a 64 MiB /dev/shm: ``doctor --json`` (exit status, JSON, the 64 MiB
   seen), ``run --require 1g`` refusing without starting its command, and
   tests/packaging/image_probe.py with the image's own Python: uid/gid (not root), no write to
   the root filesystem, the exporter's /metrics and the webhook over TLS with one
   AdmissionReview on loopback; the image's user, entrypoint and OCI labels from its config;
4. benchmarks/image_size.py: the size the image adds over its base.

Exit status 0 when every check passes; 1 with each failure named; 2 when the image cannot be
built. DOCKER picks the client (default: one with BuildKit, see docker_client).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fleet"))
from webhook_helpers import make_pki  # noqa: E402  (the webhook tests' throwaway CA)

BASE_TAG = "shmguard-ci-base:bookworm"
MiB = 1024 * 1024
RUN_FLAGS = [
    "--rm",
    "--network",
    "none",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--shm-size",
    "64m",
]


def docker_client() -> str:
    """DOCKER, else ``docker`` when it builds with BuildKit (buildx, or a client before 23.0),
    else Debian docker.io's /usr/bin/docker (20.10) when that is there: a 23+ client without
    buildx falls back to the legacy builder, whose per-instruction commits cost ~15 s each on
    the CI daemon's vfs storage driver."""
    if env := os.environ.get("DOCKER"):
        return env
    docker = shutil.which("docker") or "docker"
    buildx = subprocess.run([docker, "buildx", "version"], capture_output=True, check=False)
    if buildx.returncode == 0 or not Path("/usr/bin/docker").exists():
        return docker
    return "/usr/bin/docker"


def debian_mirror() -> str:
    """SHMGUARD_DEBIAN_MIRROR, else the first bookworm URI of this machine's apt sources
    (deb822 .sources or one-line sources.list), else deb.debian.org."""
    if env := os.environ.get("SHMGUARD_DEBIAN_MIRROR"):
        return env
    apt = Path("/etc/apt")
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and "bookworm" in suites.group(1).split():
                return uris.group(1)
        for line in text.splitlines():
            m = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s", line)
            if m:
                return m.group(1)
    return "http://deb.debian.org/debian"


def make_base(docker: str, workdir: Path) -> None:
    """debootstrap a minimal bookworm with Python into workdir and docker-import it."""
    if shutil.which("debootstrap") is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], check=True, env=env)
    rootfs = workdir / "rootfs"
    mirror = debian_mirror()
    print(f"image_smoke: debootstrap bookworm from {mirror}", file=sys.stderr)
    subprocess.run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=python3,python3-venv,python3-pip",
            "bookworm",
            str(rootfs),
            mirror,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=900,
    )
    # apt's downloaded packages and lists: 96 MB the base (and every vfs copy of it) need not carry
    for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (rootfs / d).glob("*"):
            if p.is_file():
                p.unlink()
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run([docker, "import", "-", BASE_TAG], stdin=tar.stdout, check=True, timeout=600)
    if tar.wait() != 0:
        raise RuntimeError("tar of the debootstrap root failed")
    shutil.rmtree(rootfs)


def _container(docker: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``docker run`` with RUN_FLAGS and ``args``; the result and its stdout as JSON (None when
    it is not JSON)."""
    proc = subprocess.run(
        [docker, "run", *RUN_FLAGS, *args], capture_output=True, text=True, timeout=300, check=False
    )
    try:
        return proc, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc, None


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str, detail: Any = "") -> None:
        print(f"{'ok' if ok else 'FAIL'}: {what}" + ("" if ok else f": {detail}"))
        if not ok:
            self.failures.append(what)


def smoke(docker: str, image: str, version: str, workdir: Path, c: Checks) -> None:
    cfg = json.loads(
        subprocess.run(
            [docker, "image", "inspect", image], capture_output=True, text=True, check=True
        ).stdout
    )[0]["Config"]
    labels = cfg.get("Labels") or {}
    c.check(cfg.get("User") == "65532:65532", "image user is 65532:65532", cfg.get("User"))
    c.check(cfg.get("Entrypoint") == ["shmguard"], "entrypoint is shmguard", cfg.get("Entrypoint"))
    oci = "org.opencontainers.image."
    c.check(labels.get(oci + "version") == version, f"label version {version}", labels)
    for key in ("title", "source", "revision", "licenses"):
        c.check(bool(labels.get(oci + key)), f"label {key}", labels)

    doctor, report = _container(docker, image, "doctor", "--json")
    report = report or {}
    shm = report.get("facts", {}).get("shm", {})
    c.check(
        doctor.returncode in (0, 1) and report.get("schema") == "shmguard.doctor/1",
        f"doctor --json: exit {doctor.returncode}, JSON",
        doctor.stdout[:300] + doctor.stderr[-1000:],
    )
    c.check(shm.get("total") == 64 * MiB, "doctor sees the 64 MiB /dev/shm", shm.get("total"))
    codes = [f.get("code") for f in report.get("findings", [])]
    print(f"     doctor: exit {doctor.returncode}, findings {codes}")

    run, _ = _container(docker, image, "run", "--require", "1g", "--", "sh", "-c", "echo ran")
    c.check(
        run.returncode == 1 and "ran" not in run.stdout and "Traceback" not in run.stderr,
        "run --require 1g refuses a 64 MiB /dev/shm (exit 1, command not started)",
        f"exit {run.returncode}: {run.stdout[-500:]}{run.stderr[-1500:]}",
    )
    last = [line for line in run.stderr.splitlines() if line.strip()][-1:] or [""]
    print(f"     run --require 1g: exit {run.returncode}; {last[0].strip()[:160]}")

    # the probe and the webhook's certificate, mounted read-only and readable by uid 65532
    mount = workdir / "probe"
    mount.mkdir()
    make_pki(mount).issue("server")
    shutil.copy(ROOT / "tests" / "packaging" / "image_probe.py", mount / "image_probe.py")
    mount.chmod(0o755)
    for p in mount.iterdir():
        p.chmod(0o644)
    probe, seen = _container(
        docker,
        *("-v", f"{mount}:/probe:ro", "--entrypoint", "/opt/shmguard/bin/python", image),
        *("/probe/image_probe.py", "/probe"),
    )
    if seen is None:
        c.check(False, "image_probe.py ran", probe.stdout[-1000:] + probe.stderr[-2000:])
        return
    c.check(seen["uid"] == 65532 and seen["gid"] == 65532, "runs as uid/gid 65532", seen["uid"])
    c.check(not seen["root_writable"], "the root filesystem takes no write (--read-only)")
    ex = seen["exporter"]
    c.check(
        ex["up"] and any(float(line.rsplit(" ", 1)[1]) == 64 * MiB for line in ex["size_lines"]),
        "exporter /metrics: shmguard_up and shmguard_shm_size_bytes 64 MiB",
        ex,
    )
    c.check(ex["rc"] == 0, "exporter stops cleanly on SIGTERM", ex)
    wh = seen["webhook"]
    patch = wh.get("patch") or []
    adds_shm = any(
        op.get("op") == "add" and "/dev/shm" in json.dumps(op.get("value")) for op in patch
    ) and any("Memory" in json.dumps(op.get("value")) for op in patch)
    c.check(
        wh.get("status") == 200
        and wh.get("uid") == "0b6a4f4e-image-smoke"
        and wh.get("allowed") is True
        and wh.get("patchType") == "JSONPatch"
        and adds_shm,
        "webhook over TLS: one AdmissionReview patched with a memory-backed /dev/shm",
        wh,
    )
    c.check(wh.get("rc") == 0, "webhook stops cleanly on SIGTERM", wh)
    print(f"     webhook: {len(patch)} patch operations; exporter: {ex['size_lines'][:1]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="a local Python image (default: debootstrap one)")
    ap.add_argument("--tag", help="image name (default shmguard:<version>)")
    args = ap.parse_args()
    docker = docker_client()
    env = {**os.environ, "DOCKER": docker}
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="shmguard-image-smoke.") as tmp:
        workdir = Path(tmp)
        t = time.monotonic()
        base = args.base
        if base is None:
            make_base(docker, workdir)
            base = BASE_TAG
            times["base (debootstrap + import)"] = time.monotonic() - t
        t = time.monotonic()
        cmd = [str(ROOT / "deploy" / "image" / "build.sh"), "--base", base]
        if args.tag:
            cmd += ["--tag", args.tag]
        built = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
        times["build.sh"] = time.monotonic() - t
        print(built.stdout, end="")
        fields = dict(line.split(" ", 1) for line in built.stdout.splitlines() if " " in line)
        if built.returncode != 0 or "image" not in fields:
            print(f"FAIL: deploy/image/build.sh exit {built.returncode}", file=sys.stderr)
            return 2
        image = fields["image"]
        version = _version()
        t = time.monotonic()
        c = Checks()
        smoke(docker, image, version, workdir, c)
        times["smoke runs"] = time.monotonic() - t
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "image_size.py"), image, base],
        env=env,
        check=False,
    )
    print("times: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    if c.failures:
        print(f"image smoke: {len(c.failures)} failed: {'; '.join(c.failures)}", file=sys.stderr)
        return 1
    print("image smoke: every check passed")
    return 0


def _version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', text, re.M)
    return m.group(1) if m else "unknown"


if __name__ == "__main__":
    sys.exit(main())

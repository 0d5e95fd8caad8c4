"""Run inside the shmguard image by image_smoke.py, with the image's own Python, in a container
with no network (only loopback), a read-only root filesystem and a 64 MiB /dev/shm:

- who it runs as (uid, gid) and whether the root filesystem takes a write;
- ``shmguard exporter`` on 127.0.0.1:9808: one GET /metrics;
- ``shmguard webhook`` over TLS on 127.0.0.1:8443 (the certificate and CA mounted at the
  directory given as argv[1]): one AdmissionReview about a PyTorch pod.

Prints one JSON object with what it saw on stdout; image_smoke.py judges it. Standard library
only: the image has nothing else but shmguard's dependencies.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train"},
    "spec": {"containers": [{"name": "train", "image": "pytorch/pytorch:2.3.0"}]},
}
REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "0b6a4f4e-image-smoke",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ml",
        "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
        "object": POD,
        "dryRun": False,
    },
}


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, then the exit status and stderr (SIGKILL after 10 s)."""
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def exporter() -> dict[str, Any]:
    proc = subprocess.Popen(
        ["shmguard", "exporter", "--listen", "127.0.0.1:9808"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    body, error = "", ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:9808/metrics", timeout=5) as r:
                body = r.read().decode()
            break
        except OSError as exc:
            error = str(exc)
            time.sleep(0.2)
    rc, err = _stop(proc)
    size = [line for line in body.splitlines() if line.startswith("shmguard_shm_size_bytes")]
    return {
        "rc": rc,
        "stderr": err[-2000:],
        "error": error,
        "size_lines": size,
        "up": any(line.startswith("shmguard_up") for line in body.splitlines()),
    }


def webhook(pki: Path) -> dict[str, Any]:
    proc = subprocess.Popen(
        [
            "shmguard",
            "webhook",
            "--listen",
            "127.0.0.1:8443",
            "--tls-cert",
            str(pki / "server.crt"),
            "--tls-key",
            str(pki / "server.key"),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    start = proc.stderr.readline()
    out: dict[str, Any] = {"start": start.strip()}
    if '"action":"start"' in start:
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        conn = http.client.HTTPSConnection("127.0.0.1", 8443, context=ctx, timeout=10)
        try:
            conn.request(
                "POST",
                "/mutate?timeout=3s",
                body=json.dumps(REVIEW).encode(),
                headers={"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            out["status"] = resp.status
            answer = json.loads(resp.read())["response"]
            out["uid"] = answer.get("uid")
            out["allowed"] = answer.get("allowed")
            out["patchType"] = answer.get("patchType")
            if "patch" in answer:
                out["patch"] = json.loads(base64.b64decode(answer["patch"]))
        except (OSError, ValueError, KeyError) as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
    rc, err = _stop(proc)
    out["rc"], out["stderr"] = rc, err[-2000:]
    return out


def main() -> int:
    try:
        with open("/opt/shmguard/written-at-run-time", "w"):
            root_writable = True
    except OSError:
        root_writable = False
    report = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "python": sys.executable,
        "root_writable": root_writable,
        "exporter": exporter(),
        "webhook": webhook(Path(sys.argv[1])),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

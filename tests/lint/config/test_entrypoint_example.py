"""examples/entrypoint: the Dockerfile whose ENTRYPOINT is `shmguard run` and the Kubernetes Job
that runs that image pass `shmguard check`, the Job validates against the Kubernetes 1.37
schema (kubernetes-validate, strict), and the sizes agree: the pod's /dev/shm and the
``docker run`` lines the Dockerfile documents meet the entrypoint's ``--require``, and the
memory limit leaves the policy's margin beside a full /dev/shm. The image itself runs in
tests/e2e/test_run_entrypoint_e2e.py."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import shmguard.examples
from shmguard.estimate.policy import Policy
from shmguard.units import k8s_quantity_bytes, parse_size_flag

HERE = Path(shmguard.examples.__file__).resolve().parent / "entrypoint"
DOCKERFILE = HERE / "Dockerfile"
JOB = HERE / "train-job.yaml"


def entrypoint() -> list[str]:
    line = next(ln for ln in DOCKERFILE.read_text().splitlines() if ln.startswith("ENTRYPOINT"))
    argv: list[str] = json.loads(line.removeprefix("ENTRYPOINT"))  # exec form: a JSON array
    return argv


def required() -> int:
    argv = entrypoint()
    return parse_size_flag(argv[argv.index("--require") + 1])


def test_shmguard_check_finds_nothing() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "shmguard", "check", "--json", str(HERE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    files = {Path(f["file"]).name: f for f in json.loads(r.stdout)["files"]}
    assert files["train-job.yaml"]["kind"] == "kubernetes"
    assert set(files) == {"Dockerfile", "train-job.yaml"}
    assert all(f["findings"] == [] and f["diagnostics"] == [] for f in files.values())


def test_the_job_validates_against_kubernetes_1_37() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    (doc,) = list(yaml.safe_load_all(JOB.read_text()))
    kv.validate(doc, "1.37", strict=True)


def test_the_entrypoint_is_exec_form_shmguard_run_with_watch() -> None:
    argv = entrypoint()
    assert argv[:2] == ["shmguard", "run"] and argv[-1] == "--"
    assert "--watch" in argv
    cmd = next(ln for ln in DOCKERFILE.read_text().splitlines() if ln.startswith("CMD"))
    # The default command is shipped in the image (the shmguard wheel), not a file the reader
    # must add: it used to be `python train.py`, with no train.py anywhere.
    python, flag, module = json.loads(cmd.removeprefix("CMD"))
    assert (python, flag) == ("python", "-m")
    assert importlib.util.find_spec(module) is not None, module


def test_the_sizes_meet_the_requirement() -> None:
    need = required()
    spec = yaml.safe_load(JOB.read_text())["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"][:2] == ["python", "train.py"]  # CMD replaced, entrypoint kept
    assert "command" not in container
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (vol,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert vol["emptyDir"]["medium"] == "Memory"
    shm = k8s_quantity_bytes(vol["emptyDir"]["sizeLimit"])
    assert shm >= need
    limit = k8s_quantity_bytes(container["resources"]["limits"]["memory"])
    assert limit >= shm + Policy().memory_margin  # tmpfs pages count against the limit
    documented = re.findall(r"docker run --shm-size=(\S+)", DOCKERFILE.read_text())
    assert documented and all(parse_size_flag(s) >= need for s in documented)

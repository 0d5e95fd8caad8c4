"""The image's static promises, without a Docker daemon (tests/packaging/image_smoke.py builds
and runs it in CI): every manifest in deploy/ runs the one image reference, at the package's
version, and each kustomization can override it with ``images:``; the Dockerfile's final stage
runs as a numeric non-root user, installs from the wheelhouse only, keeps no pip cache and
carries the OCI labels; build.sh answers --help and refuses a bad argument; .ci/run runs the
image smoke with its daemon up."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from shmguard import __version__

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "image" / "Dockerfile"
BUILD = DEPLOY / "image" / "build.sh"
IMAGE = "ghcr.io/your-org/shmguard"


def _containers(doc: Any) -> list[dict[str, Any]]:
    """Every container and init container below ``doc``, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                found += [c for c in value if isinstance(c, dict)]
            else:
                found += _containers(value)
    elif isinstance(doc, list):
        for value in doc:
            found += _containers(value)
    return found


def _shmguard_containers() -> dict[str, list[str]]:
    """file -> the image of every container in it that runs shmguard."""
    images: dict[str, list[str]] = {}
    for f in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            for c in _containers(doc):
                if "shmguard" in (c.get("command") or [""])[0]:
                    images.setdefault(str(f.relative_to(ROOT)), []).append(c["image"])
    return images


def test_every_manifest_runs_the_one_image_at_the_package_version() -> None:
    images = _shmguard_containers()
    assert set(images) == {
        "deploy/kubernetes/daemonset.yaml",
        "deploy/kubernetes/sidecar.yaml",
        "deploy/webhook/deployment.yaml",
    }
    assert {i for found in images.values() for i in found} == {f"{IMAGE}:{__version__}"}
    # the Docker example and the docs name the same reference, and no other shmguard image
    for f in [DEPLOY / "docker" / "README.md", DEPLOY / "docker" / "run-with-exporter.sh"]:
        refs = set(re.findall(r"[\w.-]+(?:/[\w.-]+)*/shmguard:[\w.-]+", f.read_text()))
        assert refs == {f"{IMAGE}:{__version__}"}, f
    for f in [*DEPLOY.rglob("*"), *(ROOT / "docs").rglob("*.md")]:
        if f.is_file():
            assert "registry.example.com/shmguard" not in f.read_text(errors="replace"), f


def test_each_kustomization_overrides_that_image() -> None:
    for kust_file in [
        DEPLOY / "webhook" / "kustomization.yaml",
        DEPLOY / "kubernetes" / "kustomization.yaml",
    ]:
        kust = yaml.safe_load(kust_file.read_text())
        assert kust["images"] == [{"name": IMAGE, "newTag": __version__}], kust_file
        listed = {kust_file.parent / r for r in kust["resources"]}
        assert any(str(f.relative_to(ROOT)) in _shmguard_containers() for f in listed)


def _final_stage() -> str:
    text = DOCKERFILE.read_text()
    return text[text.rindex("\nFROM ") :]


def test_the_final_stage_runs_as_a_numeric_non_root_user() -> None:
    users = re.findall(r"^USER\s+(\S+)", _final_stage(), re.M)
    assert len(users) == 1
    uid, _, gid = users[0].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    # the webhook Deployment's securityContext runs the same user
    dep = yaml.safe_load((DEPLOY / "webhook" / "deployment.yaml").read_text())
    ctx = dep["spec"]["template"]["spec"]["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["runAsNonRoot"]) == (int(uid), int(gid), True)


def test_dockerfile_installs_from_the_wheelhouse_only_and_keeps_no_tools() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG BASE=python:3\.\d+-slim-\w+$", text, re.M)
    assert text.count("FROM ${BASE}") == 2  # a build stage and the final one, on the same base
    install = re.search(r"-m pip install ([^&]+)", text)
    assert install is not None
    for flag in ("--no-index", "--find-links /wheels", "--no-cache-dir"):
        assert flag in install.group(1)
    final = _final_stage()
    # the final stage copies the built venv and runs nothing: no package manager, no compiler
    assert not re.search(r"^RUN\b", final, re.M)
    assert "COPY --from=build /opt/shmguard /opt/shmguard" in final
    assert re.search(r'^ENTRYPOINT \["shmguard"\]$', final, re.M)
    assert "PYTHONDONTWRITEBYTECODE=1" in final


def test_dockerfile_carries_the_oci_labels() -> None:
    labels = dict(re.findall(r"org\.opencontainers\.image\.(\w+)=\"([^\"]*)\"", _final_stage()))
    assert labels["version"] == "${VERSION}"
    assert labels["title"] == "shmguard"
    assert labels["licenses"] == "Apache-2.0"
    assert labels["source"].startswith("https://")
    # build.sh passes the version from the wheel it builds, and the commit as the revision
    script = BUILD.read_text()
    assert '--build-arg "VERSION=$VERSION"' in script
    assert "org.opencontainers.image.revision=$REVISION" in script


def test_build_sh_help_and_a_bad_argument() -> None:
    ok = subprocess.run([str(BUILD), "--help"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0
    assert ok.stdout.startswith("usage: deploy/image/build.sh [--base IMAGE] [--tag TAG]")
    bad = subprocess.run([str(BUILD), "--bsae", "x"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert "build.sh: unknown argument: --bsae" in bad.stderr
    empty = subprocess.run([str(BUILD), "--base"], capture_output=True, text=True, timeout=30)
    assert (empty.returncode, empty.stderr.strip()) == (2, "build.sh: --base needs an image")


def test_ci_runs_the_image_smoke_with_its_daemon_up_before_pytest() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    code = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    start = code.index("shmguard_start_dockerd 60")
    smoke = next(i for i, line in enumerate(code) if "tests/packaging/image_smoke.py" in line)
    pytest_at = next(i for i, line in enumerate(code) if line.endswith("-m pytest -q"))
    assert start < smoke < pytest_at
    assert "trap shmguard_stop_dockerd EXIT" in code[:start]

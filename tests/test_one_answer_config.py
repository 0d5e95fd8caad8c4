"""One answer on the configuration side (issue 19): the same pod template, with the same
``shmguard.io/shm-size`` annotation, through ``shmguard check --fix`` (the CLI, on a file) and
the webhook (:func:`shmguard.fleet.admission.decide_admission`, on an AdmissionReview of the
pod the template makes) gives the same /dev/shm, written the same way; an annotation neither
can read is skipped by both, with a warning naming it, and both fall back to the same size."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.fleet.admission import decide_admission
from shmguard.units import GiB, MiB, k8s_quantity_bytes

ANNOTATION = "shmguard.io/shm-size"


def template(size: str) -> dict[str, Any]:
    """A Deployment of one PyTorch container whose pod template carries ``size``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "selector": {"matchLabels": {"app": "train"}},
            "template": {
                "metadata": {"labels": {"app": "train"}, "annotations": {ANNOTATION: size}},
                "spec": {
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                            "command": ["torchrun", "train.py"],
                        }
                    ]
                },
            },
        },
    }


def shm_size_limit(pod_spec: dict[str, Any]) -> str:
    """The sizeLimit of the memory emptyDir the container mounts at /dev/shm."""
    (c,) = pod_spec["containers"]
    (name,) = [m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (vol,) = [v for v in pod_spec["volumes"] if v["name"] == name]
    assert vol["emptyDir"]["medium"] == "Memory"
    return str(vol["emptyDir"]["sizeLimit"])


def check_fix(tmp_path: Path, size: str) -> tuple[str, str]:
    """``shmguard check --fix`` on the Deployment: (the sizeLimit written, the finding's
    text output)."""
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump(template(size), sort_keys=False))
    r = CliRunner().invoke(app, ["check", str(path)])
    report = r.stdout
    r = CliRunner().invoke(app, ["check", "--fix", str(path)])
    assert r.exit_code == 0, r.stdout + r.stderr
    fixed = yaml.safe_load(path.read_text())
    return shm_size_limit(fixed["spec"]["template"]["spec"]), report


def webhook(size: str) -> tuple[str, tuple[str, ...], str]:
    """The webhook's decision for a CREATE of the pod the template makes: (the sizeLimit its
    patch writes, its warnings, the decision annotation)."""
    tpl = template(size)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", **tpl["metadata"]}}
    pod["spec"] = tpl["spec"]
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "ml",
            "operation": "CREATE",
            "object": pod,
        },
    }
    d = decide_admission(review)
    assert d.action == "inject", d.message
    patched = jsonpatch.apply_patch(copy.deepcopy(pod), list(d.patch))
    decision = patched["metadata"]["annotations"]["shmguard.io/decision"]
    return shm_size_limit(patched["spec"]), d.warnings, decision


@pytest.mark.parametrize(
    ("size", "written", "expected"),
    [
        ("2g", "2Gi", 2 * GiB),  # go-units: Docker sizes are binary (the webhook gave 1Gi)
        ("2gb", "2Gi", 2 * GiB),
        ("2Gi", "2Gi", 2 * GiB),
        ("2G", "2G", 2_000_000_000),  # Kubernetes' decimal giga, not 2 GiB
        ("1500Mi", "1500Mi", 1500 * MiB),
    ],
)
def test_check_fix_and_the_webhook_give_the_annotated_size(
    tmp_path: Path, size: str, written: str, expected: int
) -> None:
    fixed, report = check_fix(tmp_path, size)
    injected, warnings, decision = webhook(size)
    assert fixed == injected == written
    assert k8s_quantity_bytes(fixed) == expected
    assert "ignored" not in report and not any("ignored" in w for w in warnings)
    assert f"{ANNOTATION}={size}" in decision


@pytest.mark.parametrize(
    ("size", "why"),
    [
        ("1m", "'1m' is 1 millibytes in a Kubernetes quantity (m is milli, not mebi)"),
        ("0.5", "'0.5' is less than one byte"),
        ("1e999", "'1e999' is more than 8 EiB"),
        ("9" * 5000, "(5000 characters) is too long for a size"),
        ("0", "'0': a size must be greater than 0"),
        ("lots", "'lots' is neither a Kubernetes quantity nor a Docker size"),
    ],
    ids=["milli", "sub-byte", "1e999", "5000-digits", "zero", "words"],
)
def test_an_unreadable_annotation_is_skipped_with_a_warning_in_both(
    tmp_path: Path, size: str, why: str
) -> None:
    fixed, report = check_fix(tmp_path, size)
    injected, warnings, decision = webhook(size)
    # Both fall back to the sizing policy's default, and say why.
    assert fixed == injected == "1Gi"
    assert "sizing policy default" in decision
    (warning,) = [w for w in warnings if w.startswith(f"shmguard: {ANNOTATION} ignored: ")]
    assert why in warning
    (finding,) = [line for line in report.splitlines() if " SHM001 " in line]
    assert f"it gets the runtime's 64 MiB; {warning.removeprefix('shmguard: ')}" in finding
    assert len(finding) < 600  # the 5,000 digits are never echoed

"""One answer on the configuration side (issue 19): every command that gives a /dev/shm size
builds its evidence and asks the one size decision, so the same evidence gives the same bytes.

Each command is run through its own entry, never the shared function: ``shmguard check --fix``,
``shmguard doctor --json`` and ``shmguard explain --json`` (the CLI), the webhook
(:func:`shmguard.fleet.admission.decide_admission` on an AdmissionReview of the pod the
Deployment's template makes) and the Kyverno mutate (its size read from the policy ``shmguard
policy --engine kyverno`` prints, parsed as YAML; no Kyverno engine runs here).

* the ``shmguard.io/shm-size`` annotation: check --fix and the webhook write the same size the
  same way; one neither can read, or one at or below the runtimes' 64 MiB default (which a fix
  never writes), is skipped by both, with a warning naming it;
* the ``shmguard.io/dataloader`` annotation: check --fix and the webhook write the DataLoader
  model's size (the predicted peak plus headroom, rounded: what ``shmguard plan`` prints),
  ``batch_bytes`` read by the one annotation parser; parameters neither can read are skipped
  by both with a warning naming the annotation; a model's size the memory limit cannot hold
  beside the margin gets no size from either (check --fix: no fix; the webhook: ``no-room``),
  while the flag and the size annotation are still taken as given;
* a flag (``--shm-size``): check --fix and explain take it as given;
* the DataLoader's parameters: explain of a DataLoader failure whose inputs show the loader
  (here the Deployment's ``shmguard.io/dataloader`` given with the log) gives the size check
  --fix and the webhook write for that annotation;
* no evidence at all: the policy's default (1 GiB) in check --fix, the webhook, the Kyverno
  mutate, doctor and explain (a DataLoader failure whose log shows no size and no loader);
  under a 1.5 GiB memory limit the same 512 MiB (the limit less the 1 GiB margin) in check
  --fix, the webhook, doctor and explain (the limit on the log's `docker run` line). The
  Kyverno mutate writes one static value and cannot cap it (fleet/policy.py says so).
"""

from __future__ import annotations

import copy
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.fleet.admission import AdmissionDecision, decide_admission
from shmguard.units import GiB, MiB, k8s_quantity_bytes

ROOT = Path(__file__).resolve().parent
#: A DataLoader bus error (PyTorch 2.13, a 64 MiB /dev/shm the log does not show).
BUS_ERROR_LOG = ROOT / "fixtures" / "logs" / "torch_2.13" / "S01_f32_bs32_nw4.txt"
#: docker run --memory=8g on cgroup v2 with the default 64 MiB /dev/shm.
DOCKER_HOST = ROOT / "fixtures" / "hosts" / "docker-v2-default"

ANNOTATION = "shmguard.io/shm-size"
LOADER = "shmguard.io/dataloader"


def template(
    size: str | None, memory_limit: str | None = None, loader: str | None = None
) -> dict[str, Any]:
    """A Deployment of one PyTorch container whose pod template carries ``size`` (none for
    None) and the ``shmguard.io/dataloader`` parameters ``loader`` (none for None), with
    ``memory_limit`` as the container's ``resources.limits.memory``."""
    container: dict[str, Any] = {
        "name": "trainer",
        "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "command": ["torchrun", "train.py"],
    }
    if memory_limit is not None:
        container["resources"] = {"limits": {"memory": memory_limit}}
    annotations = {} if size is None else {ANNOTATION: size}
    if loader is not None:
        annotations[LOADER] = loader
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "selector": {"matchLabels": {"app": "train"}},
            "template": {
                "metadata": {"labels": {"app": "train"}, "annotations": annotations},
                "spec": {"containers": [container]},
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


def check_fix_spec(
    tmp_path: Path,
    size: str | None,
    memory_limit: str | None = None,
    *flags: str,
    loader: str | None = None,
) -> tuple[dict[str, Any], str]:
    """``shmguard check --fix`` on the Deployment: (the pod spec after the fix, the
    findings' text output before it)."""
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump(template(size, memory_limit, loader), sort_keys=False))
    r = CliRunner().invoke(app, ["check", *flags, str(path)])
    report = r.stdout
    r = CliRunner().invoke(app, ["check", "--fix", *flags, str(path)])
    assert r.exit_code in (0, 1), r.stdout + r.stderr
    fixed = yaml.safe_load(path.read_text())
    return fixed["spec"]["template"]["spec"], report


def check_fix(
    tmp_path: Path,
    size: str | None,
    memory_limit: str | None = None,
    *flags: str,
    loader: str | None = None,
) -> tuple[str, str]:
    """``shmguard check --fix`` on the Deployment: (the sizeLimit written, the finding's
    text output)."""
    spec, report = check_fix_spec(tmp_path, size, memory_limit, *flags, loader=loader)
    return shm_size_limit(spec), report


def webhook_decision(
    size: str | None, memory_limit: str | None = None, loader: str | None = None
) -> tuple[AdmissionDecision, dict[str, Any]]:
    """The webhook's decision for a CREATE of the pod the template makes, and the pod."""
    tpl = template(size, memory_limit, loader)["spec"]["template"]
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
    return decide_admission(review), pod


def webhook(
    size: str | None, memory_limit: str | None = None, loader: str | None = None
) -> tuple[str, tuple[str, ...], str]:
    """The webhook's decision for a CREATE of the pod the template makes: (the sizeLimit its
    patch writes, its warnings, the decision annotation)."""
    d, pod = webhook_decision(size, memory_limit, loader)
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
        ("1m", "='1m' ignored: m is milli in a Kubernetes quantity, not mebi"),
        ("0.5", "='0.5' ignored: less than one byte"),
        ("1e999", "='1e999' ignored: more than 8 EiB"),
        ("9" * 5000, "='99999999999999999999'... (5000 characters) ignored: too long for a size"),
        ("0", "='0' ignored: a size must be greater than 0"),
        ("lots", "='lots' ignored: neither a Kubernetes quantity nor a Docker size"),
        # a size a fix never writes (issue 21): the webhook gave 1 byte (then a warning below
        # 1 MiB) and 32Mi where check --fix gave no fix at all
        ("1", "='1' ignored: 1 B is not above the runtimes' 64 MiB default /dev/shm"),
        ("32Mi", "='32Mi' ignored: 32 MiB is not above the runtimes' 64 MiB default /dev/shm"),
        ("64Mi", "='64Mi' ignored: 64 MiB is not above the runtimes' 64 MiB default /dev/shm"),
    ],
    ids=["milli", "sub-byte", "1e999", "5000-digits", "zero", "words", "1-byte", "32Mi", "64Mi"],
)
def test_an_unreadable_annotation_is_skipped_with_a_warning_in_both(
    tmp_path: Path, size: str, why: str
) -> None:
    fixed, report = check_fix(tmp_path, size)
    injected, warnings, decision = webhook(size)
    # Both fall back to the sizing policy's default, and say why.
    assert fixed == injected == "1Gi"
    assert "sizing policy default" in decision
    (warning,) = [w for w in warnings if w.startswith(f"shmguard: {ANNOTATION}=")]
    assert warning.startswith(f"shmguard: {ANNOTATION}{why}")
    (finding,) = [line for line in report.splitlines() if " SHM001 " in line]
    assert f"it gets the runtime's 64 MiB; {warning.removeprefix('shmguard: ')}" in finding
    assert len(finding) < 600  # the 5,000 digits are never echoed


#: The example of docs/webhook.md: the DataLoader model's 661.7 MiB peak + 25%, rounded.
LOADER_896 = "num_workers=8,batch_size=64,sample_shape=3x224x224"
#: A 49.5 GiB predicted peak: 64 GiB of /dev/shm, which a 16 GiB memory limit cannot hold.
LOADER_64G = (
    "num_workers=16,batch_size=256,sample_shape=3x512x512,dtype=float16,prefetch_factor=4,"
    "persistent_workers=true,loaders=2"
)


@pytest.mark.parametrize(
    ("loader", "written"),
    [
        (LOADER_896, "896Mi"),  # check --fix wrote the 1Gi default before issue 19 fix A
        # batch_bytes read by the one annotation parser (the webhook skipped `2g` before):
        # 2 GiB batches predict ~12 GiB, 2,000,000,000-byte ones ~11.18 GiB
        ("num_workers=2,batch_bytes=2g", "16Gi"),
        ("num_workers=2,batch_bytes=2Gi", "16Gi"),
        ("num_workers=2,batch_bytes=2G", "14Gi"),
    ],
)
def test_check_fix_and_the_webhook_size_alike_from_the_dataloader_annotation(
    tmp_path: Path, loader: str, written: str
) -> None:
    fixed, report = check_fix(tmp_path, None, loader=loader)
    injected, warnings, decision = webhook(None, loader=loader)
    assert fixed == injected == written
    assert "sizing model: predicted peak" in decision
    assert LOADER not in report and not any(LOADER in w for w in warnings)


def test_an_unreadable_dataloader_annotation_is_warned_in_both(tmp_path: Path) -> None:
    fixed, report = check_fix(tmp_path, None, loader="num_workers=lots")
    injected, warnings, _ = webhook(None, loader="num_workers=lots")
    assert fixed == injected == "1Gi"
    why = f"{LOADER} ignored: num_workers='lots': expected a whole number"
    assert f"shmguard: {why}" in warnings
    (finding,) = [line for line in report.splitlines() if " SHM001 " in line]
    assert finding.endswith(f"it gets the runtime's 64 MiB; {why}")


def test_a_model_size_over_the_memory_limit_gets_no_size_in_both(tmp_path: Path) -> None:
    # The model's 64 GiB cannot sit under a 16 GiB limit beside the 1 GiB margin: the
    # webhook gave 64Gi and check --fix 1Gi before; now neither writes a size.
    spec, report = check_fix_spec(tmp_path, None, "16Gi", loader=LOADER_64G)
    assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]
    assert " SHM001 " in report
    d, _ = webhook_decision(None, "16Gi", LOADER_64G)
    assert (d.action, d.reason) == ("skip", "no-room")
    assert [op["path"] for op in d.patch] == ["/metadata/annotations/shmguard.io~1decision"]
    assert "a 64 GiB /dev/shm needs a memory limit of 80Gi" in d.message
    # the flag and the size annotation are taken as given
    assert check_fix(tmp_path, None, "16Gi", "--shm-size", "2Gi", loader=LOADER_64G)[0] == "2Gi"
    assert webhook("2Gi", "16Gi", LOADER_64G)[0] == "2Gi"


def kyverno_size() -> str:
    """The sizeLimit of the emptyDir the Kyverno mutate rule adds, from the printed policy."""
    r = CliRunner().invoke(app, ["policy", "--engine", "kyverno", "--mode", "warn"])
    assert r.exit_code == 0, r.stdout + r.stderr
    (policy,) = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "ClusterPolicy"]
    mutates = [rule["mutate"] for rule in policy["spec"]["rules"] if "mutate" in rule]
    found = list(_size_limits(mutates))
    assert found and len(set(found)) == 1, found
    return found[0]


def _size_limits(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "sizeLimit":
                yield str(v)
            else:
                yield from _size_limits(v)
    elif isinstance(node, list):
        for v in node:
            yield from _size_limits(v)


def doctor_size(root: Path) -> int:
    """The /dev/shm size of doctor's ENV001 fix (the runtime's default /dev/shm) on a copy of
    the host fixture ``root``."""
    r = CliRunner().invoke(app, ["doctor", "--root", str(root), "--json"])
    (env001,) = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "ENV001"]
    (size,) = [c["value"] for c in env001["fix"]["changes"] if c["setting"] == "shm-size"]
    return int(size)


def explain_size(*flags: str, files: tuple[Path, ...] = ()) -> dict[str, Any]:
    """explain's /dev/shm size (bytes and how it was chosen) for the DataLoader bus error
    (its log first, then ``files``: one incident)."""
    r = CliRunner().invoke(app, ["explain", "--json", *flags, str(BUS_ERROR_LOG), *map(str, files)])
    size: dict[str, Any] = json.loads(r.stdout)["results"][0]["fix"]["shm_size"]
    return size


def host(tmp_path: Path, memory_max: int | None = None) -> Path:
    """A copy of the docker-v2-default host fixture, its cgroup's memory.max set to
    ``memory_max`` bytes when given (the fixture's own is 8 GiB)."""
    root = tmp_path / "host"
    shutil.copytree(DOCKER_HOST, root)
    (root / "dev" / "shm").mkdir(parents=True)
    if memory_max is not None:
        (root / "sys" / "fs" / "cgroup" / "memory.max").write_text(f"{memory_max}\n")
    return root


def test_a_flag_is_taken_as_given_by_check_fix_and_explain(tmp_path: Path) -> None:
    fixed, _ = check_fix(tmp_path, None, None, "--shm-size", "3g")
    explained = explain_size("--shm-size", "3g")
    assert k8s_quantity_bytes(fixed) == explained["bytes"] == 3 * GiB
    assert explained["method"] == "the size given with --shm-size"


def test_no_evidence_gives_the_policy_default_everywhere(tmp_path: Path) -> None:
    fixed, _ = check_fix(tmp_path, None)
    injected, _, decision = webhook(None)
    assert fixed == injected == kyverno_size() == "1Gi"
    assert "sizing policy default)" in decision
    # doctor on a container with an 8 GiB limit: room for the whole default beside the margin
    assert doctor_size(host(tmp_path)) == k8s_quantity_bytes(fixed) == GiB


def test_the_default_under_a_memory_limit_is_capped_alike(tmp_path: Path) -> None:
    # 1.5 GiB limit - the 1 GiB margin: 512 MiB, in each command that knows the limit
    fixed, _ = check_fix(tmp_path, None, "1536Mi")
    injected, _, decision = webhook(None, "1536Mi")
    assert fixed == injected == "512Mi"
    assert "capped at what the 1.5 GiB memory limit leaves after the margin" in decision
    assert doctor_size(host(tmp_path, 1536 * MiB)) == k8s_quantity_bytes(fixed) == 512 * MiB


def test_explain_without_a_size_or_a_loader_gives_the_policy_default(tmp_path: Path) -> None:
    # The log shows no /dev/shm size and no loader: the policy's default, as check --fix and
    # the webhook write for a workload that states nothing (not the 8 GiB the DataLoader
    # signatures document, which it was before issue 22).
    explained = explain_size()
    fixed, _ = check_fix(tmp_path, None)
    assert explained["bytes"] == k8s_quantity_bytes(fixed) == GiB
    assert explained["source"] == "default" and "`shmguard measure`" in explained["method"]


def test_explain_under_a_memory_limit_caps_the_default_alike(tmp_path: Path) -> None:
    run_line = tmp_path / "run.sh"
    run_line.write_text("docker run --memory=1536m --gpus all trainer python train.py\n")
    explained = explain_size(files=(run_line,))
    fixed, _ = check_fix(tmp_path, None, "1536Mi")
    assert explained["bytes"] == k8s_quantity_bytes(fixed) == 512 * MiB
    assert explained["memory_limit"] is None  # it fits beside the margin, as chosen


@pytest.mark.parametrize(
    "loader", [LOADER_896, "num_workers=4,batch_size=32,sample_shape=3x224x224"]
)
def test_explain_sizes_the_loader_its_inputs_show_as_check_fix_and_the_webhook(
    tmp_path: Path, loader: str
) -> None:
    # the Deployment check --fix reads, given to explain beside the failure log
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(template(None, None, loader), sort_keys=False))
    explained = explain_size(files=(job,))
    fixed, _ = check_fix(tmp_path, None, loader=loader)
    injected, _, _ = webhook(None, loader=loader)
    assert explained["bytes"] == k8s_quantity_bytes(fixed) == k8s_quantity_bytes(injected)
    assert explained["source"] == "model"

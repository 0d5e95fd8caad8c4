"""User-defined checks (``[[tool.shmguard.checks]]``): templates, validation, the engine's
treatment (select, severities, suppressions, baseline, outputs) and the documented example."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schema_registry import validator
from shmguard.cli import app
from shmguard.config import Config, ConfigError
from shmguard.lint.check import check_loaded
from shmguard.lint.settings import load_config
from shmguard.model import Severity
from shmguard.sources.load import load_bytes

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
SCHEMA = validator("check")


def doc_example() -> str:
    """The TOML block of docs/configuration.md after the ``example: custom-checks`` marker."""
    text = DOC.read_text()
    found = re.search(r"<!-- example: custom-checks.*?-->\n```toml\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


@pytest.fixture
def conf(tmp_path: Path) -> Config:
    (tmp_path / "pyproject.toml").write_text(doc_example())
    return load_config(tmp_path)


def codes(conf: Config, text: str, name: str = "x.yaml") -> list[tuple[str, str, str]]:
    r = check_loaded(load_bytes(text.encode(), name), config=conf)
    return [(f.code, f.severity.value, f.message) for f in r.findings if f.code.startswith("USR")]


COMPOSE = """\
services:
  train:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    shm_size: 1g
  big:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    shm_size: 32g
    mem_limit: 64g
    labels:
      shmguard.io/shm-size: 32Gi
  web:
    image: nginx
    ipc: host
  hosted:
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    ipc: host
    mem_limit: 8g
"""


def test_doc_example_loads_and_checks_compose(conf: Config) -> None:
    assert [r.code for r in conf.checks] == ["USR001", "USR002", "USR003", "USR004", "USR005"]
    assert conf.checks[0].severity is Severity.ERROR and conf.checks[1].severity is Severity.WARNING
    assert codes(conf, COMPOSE, "compose.yaml") == [
        ("USR003", "warning", "ML units need a memory limit: no mem_limit or "
         "deploy.resources.limits.memory"),
        ("USR005", "info", "ML units state their /dev/shm need for the webhook: no "
         "shmguard.io/shm-size annotation or label"),
        ("USR001", "error", "ML jobs here need at least 2 GiB of /dev/shm: shm_size: 1g is "
         "below 2 GiB"),
        ("USR004", "warning", "More than 16 GiB of /dev/shm needs a review: shm_size: 32g is "
         "above 16 GiB"),
        ("USR002", "warning", "Give the job its own sized /dev/shm, not the host's IPC "
         "namespace: ipc: host"),
        ("USR005", "info", "ML units state their /dev/shm need for the webhook: no "
         "shmguard.io/shm-size annotation or label"),
        ("USR002", "warning", "Give the job its own sized /dev/shm, not the host's IPC "
         "namespace: ipc: host"),
    ]  # fmt: skip


def test_run_lines_default_and_podman_default_and_targets(conf: Config) -> None:
    text = (
        "docker run --gpus all nvcr.io/nvidia/pytorch:23.09-py3 python train.py\n"
        "podman run --memory 8g --shm-size 4g nvcr.io/nvidia/pytorch:23.09-py3 python t.py\n"
        "docker run --ipc=host --memory 8g nvcr.io/nvidia/pytorch:23.09-py3 python t.py\n"
        "docker run --tmpfs /dev/shm:size=512m -m 8g nvcr.io/nvidia/pytorch:23.09-py3 x\n"
        "docker run nginx\n"
    )
    found = codes(conf, text, "run.sh")
    # USR002 (forbid-ipc-host) is limited to compose and kubernetes: the --ipc=host line passes
    # (in file order: the tmpfs finding sits at its flag, after the line's USR005)
    assert [c for c, _, _ in found] == ["USR001", "USR003", "USR005", "USR005", "USR005",
                                        "USR005", "USR001"]  # fmt: skip
    assert found[0][2].endswith("no --shm-size (the runtime's 64 MiB) is below 2 GiB")
    assert found[-1][2].endswith("--tmpfs /dev/shm:size=512m is below 2 GiB")


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    shmguard.io/shm-size: 4Gi
spec:
  hostIPC: {host_ipc}
  volumes:
  - name: dshm
    emptyDir: {{medium: Memory{limit}}}
  containers:
  - name: trainer
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    resources: {{limits: {{memory: 16Gi}}}}
    volumeMounts: [{{name: dshm, mountPath: /dev/shm}}]
  - name: side
    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
"""


def test_pod_containers_sizes_and_host_ipc(conf: Config) -> None:
    small = POD.format(host_ipc="false", limit=", sizeLimit: 1Gi")
    found = codes(conf, small)
    assert [(c, m.split(": ", 1)[1]) for c, _, m in found] == [
        ("USR001", "container trainer: emptyDir dshm sizeLimit: 1Gi is below 2 GiB"),
        ("USR001", "container side: no /dev/shm volume (the runtime's 64 MiB) is below 2 GiB"),
        ("USR003", "container side: no resources.limits.memory"),
    ]
    unbounded = codes(conf, POD.format(host_ipc="false", limit=""))
    review = "More than 16 GiB of /dev/shm needs a review: container trainer: emptyDir dshm"
    assert ("USR004", "warning", f"{review} without sizeLimit: bounded only by memory") in unbounded
    host = codes(conf, POD.format(host_ipc="true", limit=""))
    assert [c for c, _, _ in host] == ["USR002", "USR003"]  # hostIPC: once per pod, no USR001


def test_engine_features_apply(tmp_path: Path, conf: Config) -> None:
    text = "docker run --gpus all nvcr.io/nvidia/pytorch:23.09-py3 python train.py\n"
    import dataclasses

    ignored = dataclasses.replace(conf, ignore=("USR00",))
    assert codes(ignored, text, "run.sh") == []
    sev = dataclasses.replace(conf, workload_severity={"ml": {"USR001": Severity.INFO}})
    assert ("USR001", "info") in [f[:2] for f in codes(sev, text, "run.sh")]
    suppressed = "# shmguard: ignore[USR001,USR005]\n" + text
    assert [c for c, _, _ in codes(conf, suppressed, "run.sh")] == ["USR003"]


def run(*args: str, cwd: Path) -> tuple[int, str, str]:
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)
    return r.exit_code, r.stdout, r.stderr


def test_cli_outputs_rules_and_baseline(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(doc_example())
    (tmp_path / "run.sh").write_text(
        "docker run --gpus all -m 8g nvcr.io/nvidia/pytorch:23.09-py3 python train.py\n"
    )
    code, out, _ = run("check", "--select", "USR001", "run.sh", cwd=tmp_path)
    assert code == 1 and out.splitlines()[0] == (
        "run.sh:1:1: USR001 [error] ML jobs here need at least 2 GiB of /dev/shm: no "
        "--shm-size (the runtime's 64 MiB) is below 2 GiB"
    )
    code, out, _ = run("check", "--json", "run.sh", cwd=tmp_path)
    doc = json.loads(out)
    SCHEMA.validate(doc)
    assert [f["code"] for f in doc["files"][0]["findings"]] == ["USR001", "SHM001", "USR005"]
    code, out, _ = run("check", "--format", "sarif", "run.sh", cwd=tmp_path)
    ids = [r["id"] for r in json.loads(out)["runs"][0]["tool"]["driver"]["rules"]]
    assert "USR001" in ids and "USR005" in ids
    code, out, _ = run("check", "--format", "github", "run.sh", cwd=tmp_path)
    assert "::error file=run.sh,line=1" in out and "USR001" in out
    code, _, _ = run("check", "--create-baseline", "b.json", "run.sh", cwd=tmp_path)
    assert code == 0
    code, out, _ = run("check", "--baseline", "b.json", "run.sh", cwd=tmp_path)
    assert code == 0 and out.endswith("in 1 file; 3 in the baseline\n")
    code, out, _ = run("check", "--select", "USR009", "run.sh", cwd=tmp_path)
    assert code == 2
    code, out, _ = run("rules", cwd=tmp_path)
    line = next(x for x in out.splitlines() if x.startswith("USR001"))
    assert line.split()[:3] == ["USR001", "ml-shm-below-2g", "error"]
    assert line.endswith("(user-defined)")
    code, out, _ = run("rules", "--json", cwd=tmp_path)
    items = {r["code"]: r for r in json.loads(out)["rules"]}
    assert items["USR002"]["user_defined"] and not items["SHM001"]["user_defined"]
    assert items["USR002"]["targets"] == ["compose", "kubernetes"]
    code, out, _ = run("rule", "usr001", cwd=tmp_path)
    assert code == 0 and out.startswith("## USR001 `ml-shm-below-2g`")
    assert "template `min-shm-size`" in out and 'size = "2g"' in out


CHECK = """\
[[tool.shmguard.checks]]
code = "USR001"
name = "a-check"
template = "min-shm-size"
message = "m"
params = {{ size = "2g" }}
{extra}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (CHECK.replace("min-shm-size", "min-shm"),
         "checks[0] (USR001).template: unknown template 'min-shm'; expected one of min-shm-size"),
        (CHECK.replace('size = "2g"', ""),
         "checks[0] (USR001).params.size: required by min-shm-size"),
        (CHECK.replace('size = "2g"', 'size = "2g", limit = 1'),
         "checks[0] (USR001).params.limit: unknown parameter of min-shm-size"),
        (CHECK.replace('"2g"', '"2 gigs"'),
         "checks[0] (USR001).params.size: invalid size '2 gigs'"),
        (CHECK.replace('"2g"', "true"), "params.size: must be a size such as"),
        (CHECK.replace("USR001", "SHM001"),
         "checks[0] (SHM001).code: SHM001 is a built-in rule; user checks are USR001-USR999"),
        (CHECK.replace("USR001", "USR1"), "checks[0] (USR1).code: user checks have codes USR0"),
        (CHECK.replace("{extra}", CHECK.replace("a-check", "b-check")),
         "checks[1] (USR001).code: USR001 is given to two checks"),
        (CHECK.replace("{extra}", CHECK.replace("USR001", "USR002")),
         "checks[1] (USR002).name: a-check is already the name of USR001"),
        (CHECK.replace("a-check", "ml-workload-without-shm-size"),
         "name: ml-workload-without-shm-size is already the name of SHM001"),
        (CHECK.replace("a-check", "A_check"), "name: must be kebab-case"),
        (CHECK.replace('message = "m"', 'severity = "fatal"\nmessage = "m"'),
         "checks[0] (USR001).severity: expected one of info, warning, error"),
        (CHECK.replace('message = "m"', 'messge = "m"'), "checks[0] (USR001).messge: unknown key"),
        (CHECK.replace('message = "m"', ""), "checks[0] (USR001).message: required"),
        (CHECK.replace('size = "2g"', 'size = "2g", workload = "gpu"'),
         "params.workload: expected one of ml, container, any"),
        (CHECK.replace('size = "2g"', 'size = "2g", targets = ["helm"]'),
         "params.targets: must be a list of compose, kubernetes, docker-run, podman-run"),
        ("[tool.shmguard]\nchecks = 1\n", "tool.shmguard.checks: must be an array of tables"),
    ],
)  # fmt: skip
def test_bad_checks_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text.replace("{extra}", "").replace("{{", "{")
                                             .replace("}}", "}"))  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 'pyproject.toml'}: tool.shmguard.")
    assert message in line


def test_bad_check_exits_2_for_check_and_rules(tmp_path: Path) -> None:
    (tmp_path / ".shmguard.toml").write_text(
        '[[checks]]\ncode = "USR001"\nname = "x"\ntemplate = "nope"\nmessage = "m"\n'
    )
    (tmp_path / "run.sh").write_text("docker run nginx\n")
    for args in (("check", "run.sh"), ("rules",), ("rule", "USR001")):
        code, _, err = run(*args, cwd=tmp_path)
        assert code == 2
        assert ".shmguard.toml: checks[0] (USR001).template: unknown template 'nope'" in err

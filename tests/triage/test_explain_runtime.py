"""The runtime explain reads from a log's own markers (shmguard.triage.runtime): each kind of
marker with a positive and a negative line, kinds counted once and weighted, the evidence in
the diagnosis, the text and the JSON, the fix for the inferred runtime first, and platforms
whose fix is a sentence instead of a snippet."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from _triage_helpers import diagnose_text

from schema_registry import validator
from shmguard.fix.snippets import fix_snippets
from shmguard.model.fix import PLATFORM_NOTES, PLATFORMS, RUNTIMES
from shmguard.render.explain_text import runtime_line
from shmguard.render.json import envelope
from shmguard.render.json_bodies import explain_body as json_body
from shmguard.triage import explain_streams
from shmguard.triage.model import LOG_RUNTIMES, Signature
from shmguard.triage.runtime import ORDER, WEIGHTS

SCHEMA = validator("explain")

BUS = (
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is "
    "possible that dataloader's workers are out of shared memory. Please try to raise your "
    "shared memory limit.\n"
)

#: (marker line, the runtime it shows, the confidence of that kind).
POSITIVE = [
    (
        "$ docker run --gpus all -it --shm-size=1g nvcr.io/nvidia/pytorch:24.05-py3",
        "docker",
        "high",
    ),
    ("sudo nvidia-docker run --rm -it trainer:1.0 python train.py", "docker", "high"),
    ("docker -H :4000 --debug=true run --name nginx22 nginx", "docker", "high"),
    ("docker: Error response from daemon: OCI runtime create failed.", "docker", "high"),
    ("See 'docker run --help'.", "docker", "high"),
    ("root@gpu1:~# docker logs --tail 100 trainer", "docker", "high"),
    ("Unable to find image 'trainer:1.0' locally", "docker", "high"),
    ("Jun 03 10:12:01 node1 dockerd[1234]: level=error msg=x", "docker", "high"),
    ("mkdir /var/lib/docker/overlay2/abc/merged: no space left on device", "docker", "medium"),
    ('            "OOMKilled": false,', "docker", "high"),
    (
        "5135fc87695d:126319:126336 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate",
        "docker",
        "low",
    ),
    (
        "[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)",
        "docker",
        "low",
    ),
    ("[fd7fd1d78666:03983] Signal: Bus error (7)", "docker", "low"),
    ("root@c8680db4aa07:/workspace# python train.py", "docker", "low"),
    ("$ docker compose up trainer", "compose", "medium"),
    ("trainer-1  | RuntimeError: boom", "compose", "medium"),
    ("trainer_1  | RuntimeError: boom", "compose", "medium"),
    (" ⠿ Container app-trainer-1  Started", "compose", "high"),
    (
        "  Warning  Evicted  12m  kubelet  The node was low on resource: memory.",
        "kubernetes",
        "high",
    ),
    ("Controlled By:  Job/train", "kubernetes", "high"),
    ("    Container ID:   containerd://4f0c7a1e9b2d", "kubernetes", "high"),
    (
        "    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)",
        "kubernetes",
        "high",
    ),
    ("      Exit Code:    137", "kubernetes", "high"),
    ("train-0   0/1     OOMKilled          3          2m29s", "kubernetes", "high"),
    ("train-0   0/1     CrashLoopBackOff   5          9m", "kubernetes", "high"),
    ("containers: - name: app reason: OOMKilled code: 137", "kubernetes", "high"),
    ("$ kubectl -n ml logs train-0 --previous", "kubernetes", "high"),
    ('Error from server (BadRequest): container "train" is waiting to start', "kubernetes", "high"),
    ("$ podman run --rm -it trainer:1.0", "podman", "high"),
    (
        "Error: invalid config provided: cannot set shmsize when running in the {host } IPC",
        "podman",
        "high",
    ),
    ("See 'podman pod create --help'", "podman", "high"),
    ("Error: unknown flag: --shm_size", "podman", "low"),
    ("shm                      63M     0  63M   0% /dev/shm", "podman", "low"),
    ("Stopped reason\tEssential container in task exited", "ecs", "high"),
    (
        "CannotStartContainerError: Error response from daemon: OCI runtime create failed",
        "ecs",
        "high",
    ),
    ('"linuxParameters": {"sharedMemorySize": 2048}', "ecs", "medium"),
    (
        "slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 ***",
        "slurm",
        "high",
    ),
    ("srun: error: node1: task 0: Out Of Memory", "slurm", "high"),
    ("tail -f slurm-867816.out", "slurm", "medium"),
    ("$ singularity exec trainer.sif python train.py", "apptainer", "high"),
    ("$ apptainer run --nv trainer.sif", "apptainer", "high"),
    ("INFO:    Converting SIF file to temporary sandbox...", "apptainer", "high"),
    ("Failed. Reason: AlgorithmError: ExecuteUserScriptError:", "sagemaker", "high"),
    (
        "2020-01-11 00:31:02,011 sagemaker-containers ERROR    ExecuteUserScriptError:",
        "sagemaker",
        "high",
    ),
    ("See azureml-logs/70_driver_log.txt", "azureml", "high"),
    (
        '  File "/azureml-envs/x/lib/python3.8/site-packages/azureml/core/run.py", line 1',
        "azureml",
        "medium",
    ),
    (
        '  File "/databricks/python/lib/python3.9/site-packages/torch/x.py", line 1',
        "databricks",
        "high",
    ),
    (
        '  File "/usr/local/lib/python3.10/dist-packages/google/colab/_shell.py", line 3',
        "colab",
        "high",
    ),
    ("from google.colab import drive", "colab", "medium"),
]

#: Lines that mention a runtime without showing the job ran in it.
NEGATIVE = [
    '  File "/home/user/docker/train.py", line 12, in <module>',
    '  File "/opt/conda/lib/python3.10/site-packages/docker/api/client.py", line 268, in f',
    '  File "/usr/lib/python3/dist-packages/kubernetes/client/api_client.py", line 244, in g',
    '  File "/app/kubernetes.py", line 12, in <module>',
    "If you are inside a Docker container, you can increase /dev/shm size by passing "
    "'--shm-size=0.07gb' to 'docker run'.",
    "If you are running Triton inside docker, use '--shm-size' flag to control the region size.",
    "   docker run --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 ...",
    "I built the image with docker and ran it with podman on our slurm cluster.",
    "host1:126318:126318 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
    "123456789012:1:1 [0] NCCL WARN all-digit hostname",
    "root@host1:~/mnt# df -h | grep shm",
    "Warning: the dataset has no labels",
    "State: Running",
    "Exit Code: 1",
    "/home/user/pod/train.py",
    "composer install finished",
    "  1 | trainer",
    "unknown flag: --shm_size",
    "shm                      64M     0  64M   0% /dev/shm",
    "We use singularity on the cluster.",
    "pip install sagemaker azureml",
    '  File "/content/drive/project/train.py", line 3, in <module>',
    '  File "/home/user/databricks/python/train.py", line 3, in <module>',
]


@pytest.mark.parametrize(("line", "runtime", "confidence"), POSITIVE)
def test_marker_names_its_runtime(
    catalogue: Sequence[Signature], line: str, runtime: str, confidence: str
) -> None:
    d = diagnose_text("step 1 loss 0.3\n" + line + "\n", catalogue)
    assert (d.runtime, d.runtime_source, d.runtime_confidence) == (runtime, "log", confidence)
    (ev,) = d.runtime_evidence
    assert ev.line == 2 and ev.file == "log"


@pytest.mark.parametrize("line", NEGATIVE)
def test_mention_is_not_a_marker(catalogue: Sequence[Signature], line: str) -> None:
    d = diagnose_text(line + "\n" + BUS, catalogue)
    assert (d.runtime, d.runtime_source, d.runtime_evidence) == (None, None, ())


def test_every_runtime_and_platform_has_markers(catalogue: Sequence[Signature]) -> None:
    shown = {rt for _line, rt, _conf in POSITIVE}
    assert shown == set(LOG_RUNTIMES) == set(RUNTIMES) | set(PLATFORMS) == set(ORDER)


def test_a_kind_repeated_on_every_line_counts_once(catalogue: Sequence[Signature]) -> None:
    # 200 NCCL lines with a container-ID hostname are one low kind (1) for docker; one
    # kubectl line is a high kind (4) for kubernetes. Counting lines would say docker.
    nccl = "5135fc87695d:126319:126336 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate\n"
    d = diagnose_text(nccl * 200 + "$ kubectl logs train-0 --previous\n", catalogue)
    assert d.runtime == "kubernetes" and d.runtime_confidence == "high"
    assert [ev.line for ev in d.runtime_evidence] == [201]


def test_kinds_add_up_and_ties_go_to_the_more_specific(catalogue: Sequence[Signature]) -> None:
    assert WEIGHTS == {"low": 1, "medium": 2, "high": 4}
    # docker: daemon path (medium 2); compose: a service prefix (medium 2): a tie -> compose.
    log = "trainer-1  | x\nmkdir /var/lib/docker/overlay2/a: no space left on device\n"
    assert diagnose_text(log, catalogue).runtime == "compose"
    # Two medium compose kinds (4) beat one medium docker kind (2) even when listed last.
    log = "/var/lib/docker/volumes/x\ntrainer-1  | x\n$ docker compose logs trainer\n"
    d = diagnose_text(log, catalogue)
    assert d.runtime == "compose" and [ev.line for ev in d.runtime_evidence] == [2, 3]
    # A container runtime before the scheduler around it: docker run inside a Slurm job.
    log = "srun: error: node1: task 0: Exited\n$ docker run --rm trainer:1.0\n"
    assert diagnose_text(log, catalogue).runtime == "docker"


def test_evidence_strongest_kind_first_at_most_three(catalogue: Sequence[Signature]) -> None:
    log = (
        "deleted /var/lib/docker/tmp/x\n"  # medium
        "5135fc87695d:1:2 [0] NCCL WARN Call to posix_fallocate failed\n"  # low
        "$ docker run --shm-size=1g trainer:1.0\n"  # high
        "docker: Error response from daemon: oops.\n"  # high
        "Unable to find image 'x:1' locally\n"  # high
    )
    d = diagnose_text(log, catalogue)
    assert d.runtime == "docker" and d.runtime_confidence == "high"
    assert [ev.line for ev in d.runtime_evidence] == [3, 4, 5]


def test_flag_overrides_the_log(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text("$ kubectl logs train-0\n" + BUS, catalogue, runtime="docker")
    assert (d.runtime, d.runtime_source, d.runtime_confidence) == ("docker", "flag", None)
    assert d.runtime_evidence == ()


DESCRIBE = """\
Name:             train-0
Controlled By:  Job/train
  Warning  Evicted  12m  kubelet  Pod ephemeral local storage usage exceeds the total limit
"""


def test_fix_for_the_inferred_runtime_comes_first(catalogue: Sequence[Signature]) -> None:
    for log, runtime in [
        (DESCRIBE + BUS, "kubernetes"),
        ("$ docker run -it trainer:1.0\n" + BUS, "docker"),
        ("trainer-1  | " + BUS, "compose"),
        ("$ podman run -it trainer:1.0\n" + BUS, "podman"),
        ('"linuxParameters": {"sharedMemorySize": 64}\n' + BUS, "ecs"),
    ]:
        d = diagnose_text(log, catalogue)
        fix = d.results[0].fix
        assert d.runtime == runtime and fix is not None and fix.runtime == runtime
        snippets = fix_snippets(fix)
        assert [s.runtime for s in snippets] == [runtime]
        data = envelope("explain", json_body(d))
        assert data["results"][0]["fix"]["snippets"][0]["runtime"] == runtime


def test_a_hinted_runtime_leads_the_other_snippets(catalogue: Sequence[Signature]) -> None:
    # A df of Podman's default /dev/shm only hints at Podman: its snippet first, then the rest.
    log = "shm                      63M     0  63M   0% /dev/shm\n" + BUS
    d = diagnose_text(log, catalogue)
    assert (d.runtime, d.runtime_confidence) == ("podman", "low")
    fix = d.results[0].fix
    assert fix is not None and fix.runtime is None
    assert [s.runtime for s in fix_snippets(fix)] == [
        "podman",
        "docker",
        "compose",
        "kubernetes",
        "ecs",
    ]
    assert fix.runtime_notes[0].startswith("podman: ")
    data = envelope("explain", json_body(d))
    SCHEMA.validate(data)
    assert data["results"][0]["fix"]["snippets"][0]["runtime"] == "podman"


def test_platform_fix_is_a_sentence_with_the_size(catalogue: Sequence[Signature]) -> None:
    for platform, marker in [
        ("slurm", "srun: error: node1: task 0: Bus error"),
        ("apptainer", "$ apptainer exec trainer.sif python train.py"),
        ("sagemaker", "Failed. Reason: AlgorithmError: ExecuteUserScriptError:"),
        ("azureml", "See azureml-logs/70_driver_log.txt"),
        ("databricks", '  File "/databricks/python/lib/python3.9/site-packages/x.py", line 1'),
        ("colab", "from google.colab import drive"),
    ]:
        d = diagnose_text(marker + "\n" + BUS, catalogue)
        fix = d.results[0].fix
        assert d.runtime == platform and fix is not None and fix.runtime == platform
        assert fix_snippets(fix) == () and fix.changes == ()
        assert fix.shm_size is not None and fix.shm_size.bytes == 1 << 30
        assert fix.runtime_notes == (PLATFORM_NOTES[platform],)


def test_slurm_oom_kill_gets_the_slurm_sentence(catalogue: Sequence[Signature]) -> None:
    log = (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=14604003.0 cgroup.\n"
        "srun: error: o0616: task 0: Out Of Memory\n"
    )
    d = diagnose_text(log, catalogue)
    top = d.results[0]
    assert d.runtime == "slurm" and top.id == "memory-oom-kill"
    assert top.fix is not None and top.fix.shm_size is None
    assert top.fix.runtime_notes[0].startswith("Request more memory for the job (`#SBATCH --mem")


def test_runtime_line_shows_the_evidence(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(DESCRIBE + BUS, catalogue)
    assert runtime_line(d) == (
        "Runtime: kubernetes (from line 2: `Controlled By:  Job/train`; line 3: "
        "`Warning  Evicted  12m  kubelet  Pod ephemeral local storage usage exceeds the t…`)"
    )
    weak = diagnose_text("root@c8680db4aa07:/workspace# python train.py\n" + BUS, catalogue)
    assert runtime_line(weak) == (
        "Runtime: docker, a hint only (from line 1: `root@c8680db4aa07:/workspace# python "
        "train.py`); its fix comes first, the others follow"
    )


def test_runtime_evidence_names_the_input_when_there_are_several(
    catalogue: Sequence[Signature],
) -> None:
    d = explain_streams(
        [("train.log", io.BytesIO(BUS.encode())), ("pod.txt", io.BytesIO(DESCRIBE.encode()))],
        signatures=catalogue,
    )
    assert d.runtime == "kubernetes"
    assert {ev.file for ev in d.runtime_evidence} == {"pod.txt"}
    assert runtime_line(d).startswith("Runtime: kubernetes (from pod.txt line 2: `Controlled")


def test_json_carries_the_runtime_evidence(catalogue: Sequence[Signature]) -> None:
    d = diagnose_text(DESCRIBE + BUS, catalogue)
    data = envelope("explain", json_body(d))
    SCHEMA.validate(data)
    assert data["runtime"] == "kubernetes" and data["runtime_source"] == "log"
    assert data["runtime_confidence"] == "high"
    assert [(e["line"], e["pattern"]) for e in data["runtime_evidence"]] == [
        (2, "controlled-by"),
        (3, "event-row"),
    ]


def test_cli_prints_the_runtime_with_its_evidence(tmp_path: Path) -> None:
    log = tmp_path / "pod.log"
    log.write_text(DESCRIBE + BUS)
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "explain", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == (
        "Runtime: kubernetes (from line 2: `Controlled By:  Job/train`; line 3: "
        "`Warning  Evicted  12m  kubelet  Pod ephemeral local storage usage exceeds the t…`)"
    )
    assert "Kubernetes pod spec:" in done.stdout and "docker run" not in done.stdout


@pytest.mark.parametrize(("flag", "runtime"), [("slurm", "slurm"), ("singularity", "apptainer")])
def test_cli_accepts_platforms(tmp_path: Path, flag: str, runtime: str) -> None:
    log = tmp_path / "bus.log"
    log.write_text(BUS)
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "explain", "--json", "--runtime", flag, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    SCHEMA.validate(data)
    fix = data["results"][0]["fix"]
    assert (data["runtime"], data["runtime_source"]) == (runtime, "flag")
    assert fix["runtime"] == runtime and fix["snippets"] == []
    assert fix["runtime_notes"] == [PLATFORM_NOTES[runtime]]

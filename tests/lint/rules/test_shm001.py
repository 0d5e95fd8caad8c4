"""SHM001 `ml-workload-without-shm-size`: its own cases beyond the documented examples (which
tests/lint/test_rule_examples.py runs)."""

from __future__ import annotations

from pathlib import Path

from _rule_helpers import fixes_of

from shmguard.lint.check import check_loaded, fix_file
from shmguard.model.finding import Applicability
from shmguard.sources.load import load_bytes

POD = b"""apiVersion: v1
kind: Pod
metadata: {name: t}
spec:
  containers:
    - name: t
      image: pytorch/pytorch
      volumeMounts:
        - {name: dshm, mountPath: /dev/shm}
  volumes:
    - name: dshm
      emptyDir: MEDIUM
"""


def test_flow_style_service_gets_shm001_inserted_first() -> None:
    src = b"services:\n  train: {image: pytorch/pytorch, command: torchrun train.py}\n"
    assert fixes_of(src) == [("SHM001", 'Add shm_size: "1g"', "safe", ('shm_size: "1g", ',))]
    r = fix_file(src, "compose.yaml")
    assert r.data == (
        b"services:\n"
        b'  train: {shm_size: "1g", image: pytorch/pytorch, command: torchrun train.py}\n'
    )
    assert r.remaining.findings == ()


def test_service_through_an_anchor_is_not_edited() -> None:
    src = (
        b"x-t: &t\n  image: pytorch/pytorch\n  command: torchrun train.py\n"
        b"services:\n  a: *t\n  b: *t\n"
    )
    got = check_loaded(load_bytes(src, "compose.yaml")).findings
    assert [f.code for f in got] == ["SHM001", "SHM001"]
    assert all(f.fix is not None and f.fix.applicability is Applicability.DISPLAY_ONLY for f in got)


def test_disk_backed_emptydir_at_dev_shm_is_info_with_a_shown_fix() -> None:
    for medium in (b"{}", b'{medium: ""}'):
        (f,) = check_loaded(load_bytes(POD.replace(b"MEDIUM", medium), "pod.yaml")).findings
        assert (f.code, f.severity.value) == ("SHM001", "info")
        assert f.message == (
            "Pod t: container 't' mounts the disk-backed emptyDir 'dshm' at /dev/shm: no 64 MiB "
            "limit, but a directory on the node's disk rather than a tmpfs (shared memory goes "
            "through the page cache and counts as ephemeral storage)"
        )
        assert f.fix is not None and f.fix.edits == ()
        assert f.fix.title == "Write medium: Memory (and a sizeLimit)"
    for medium in (b"{medium: Memory, sizeLimit: 1Gi}", b"{medium: HugePages}"):
        assert check_loaded(load_bytes(POD.replace(b"MEDIUM", medium), "pod.yaml")).findings == ()


def test_no_volume_at_dev_shm_message() -> None:
    src = POD.replace(b"      volumeMounts:\n        - {name: dshm, mountPath: /dev/shm}\n", b"")
    (f,) = check_loaded(load_bytes(src.replace(b"MEDIUM", b"{}"), "pod.yaml")).findings
    assert (f.code, f.severity.value) == ("SHM001", "warning")
    assert f.message == (
        "Pod t: container 't' is an ML workload (image pytorch/pytorch (pytorch)) with no "
        "volume at /dev/shm: it gets the runtime's 64 MiB"
    )


SHELL_FIXTURES = Path(__file__).parents[2] / "fixtures" / "shell"
SCRIPT = (
    b"#!/bin/bash\n"
    b"IMAGE=nvcr.io/nvidia/pytorch:24.01-py3\n"
    b'DOCKER_OPTS="--gpus all -v /data:/data"\n'
    b'docker run --rm ${DOCKER_OPTS} "${IMAGE}" python train.py --workers 8\n'
)


def _shm001(data: bytes, name: str = "run.sh") -> list[str]:
    return [f.message for f in check_loaded(load_bytes(data, name)).findings if f.code == "SHM001"]


def test_a_script_with_variables_gets_shm001_and_the_fix_on_the_run_line() -> None:
    (msg,) = _shm001(SCRIPT)
    assert "image nvcr.io/nvidia/pytorch:24.01-py3 (pytorch)" in msg
    r = fix_file(SCRIPT, "run.sh")
    assert r.data == SCRIPT.replace(b"docker run --rm", b"docker run --shm-size=1g --rm")
    assert r.remaining.findings == ()
    assert fix_file(r.data, "run.sh").data == r.data  # idempotent


def test_an_unresolved_expansion_keeps_the_finding_and_names_the_variable() -> None:
    src = b"docker run --gpus all $EXTRA_MOUNTS nvcr.io/nvidia/pytorch:24.01-py3 python t.py\n"
    (msg,) = _shm001(src)
    assert "(unless $EXTRA_MOUNTS sets --shm-size or --ipc; the file does not assign it)" in msg
    r = fix_file(src, "run.sh")
    # inserted before the expansion: a --shm-size the variable holds comes later and wins
    assert r.data.startswith(b"docker run --shm-size=1g --gpus all $EXTRA_MOUNTS ")
    assert _shm001(src.replace(b"\n", b"  # shmguard: ignore[SHM001]\n")) == []
    sized = b'EXTRA_MOUNTS="--shm-size=8g"\n' + src
    assert _shm001(sized) == []


def test_shm_size_after_the_image_is_the_containers_argument() -> None:
    for tool in (b"docker", b"podman"):
        src = tool + b" run --gpus all nvcr.io/nvidia/pytorch:24.01-py3 --shm-size=1g python t.py\n"
        (msg,) = _shm001(src)
        assert "(--shm-size=1g after the image is an argument of the container's command)" in msg
        assert fix_file(src, "run.sh").data.startswith(tool + b" run --shm-size=1g --gpus all")


def test_real_scripts_with_variables() -> None:
    """tests/fixtures/shell/SOURCES.tsv: the picotron README (a declare -a array with
    comments, expanded as "${DOCKER_ARGS[@]}"), OpenRLHF's docker_run.sh ($IMAGE_NAME)."""
    readme = (SHELL_FIXTURES / "awsome-distributed-training__picotron-ec2-README.md").read_bytes()
    (f,) = [f for f in check_loaded(load_bytes(readme, "README.md")).findings if f.code == "SHM001"]
    assert f.location is not None and f.location.line == 57
    r = fix_file(readme, "README.md")
    assert r.data == readme.replace(
        b'docker run "${DOCKER_ARGS[@]}"', b'docker run --shm-size=1g "${DOCKER_ARGS[@]}"'
    )
    assert fix_file(r.data, "README.md").data == r.data
    good = (SHELL_FIXTURES / "openrlhf__docker_run.sh").read_bytes()
    assert _shm001(good, "docker_run.sh") == []
    bad = (SHELL_FIXTURES / "openrlhf__docker_run-unsized.sh").read_bytes()
    (msg,) = _shm001(bad, "docker_run.sh")
    assert "image nvcr.io/nvidia/pytorch:26.03-py3 (pytorch)" in msg
    r = fix_file(bad, "docker_run.sh")
    assert r.data == bad.replace(b"docker run --runtime", b"docker run --shm-size=1g --runtime")


def _sev(data: bytes, name: str) -> list[tuple[str, str | None, str | None]]:
    """SHM001's findings: severity, the fix's applicability (None without edits), the text
    after '; info only: '."""
    out = []
    for f in check_loaded(load_bytes(data, name)).findings:
        if f.code == "SHM001":
            app = f.fix.applicability.value if f.fix is not None and f.fix.edits else None
            why = f.message.partition("; info only: ")[2] or None
            out.append((f.severity.value, app, why))
    return out


def test_single_gpu_pytorchjob_with_no_dataloader_worker_is_info() -> None:
    """The held-out shape: a PyTorchJob whose containers have a GPU limit of 1 and say
    --workers=0 gets no warning; --workers=4, torchrun --nproc-per-node=2 or a GPU limit of
    2 keep the warning."""
    fixtures = Path(__file__).parents[1] / "config" / "fixtures_rules_b"
    why = (
        "--workers=0 starts no DataLoader worker and one GPU needs no NCCL shared memory "
        "inside the container"
    )
    quiet = (fixtures / "shm001_pytorchjob_1gpu_workers0.yaml").read_bytes()
    assert _sev(quiet, "pj.yaml") == [("info", "unsafe", why)] * 2
    assert fix_file(quiet, "pj.yaml").data == quiet  # --fix leaves it; --unsafe-fixes adds
    assert b"mountPath: /dev/shm" in fix_file(quiet, "pj.yaml", unsafe=True).data
    for name in (
        "shm001_pytorchjob_1gpu_workers4.yaml",
        "shm001_pytorchjob_1gpu_nproc2.yaml",
        "shm001_pytorchjob_2gpu_workers0.yaml",
    ):
        data = (fixtures / name).read_bytes()
        assert _sev(data, name) == [("warning", "safe", None)] * 2, name


def test_arguments_on_run_lines_and_compose() -> None:
    img = b"nvcr.io/nvidia/pytorch:24.01-py3"
    for gpus, sev in (
        (b"--gpus 1", "info"),
        (b"--gpus '\"device=0\"'", "info"),
        (b"--gpus all", "warning"),
        (b"--gpus 2", "warning"),
    ):
        src = b"docker run " + gpus + b" " + img + b" python t.py --num-workers=0\n"
        assert [s for s, _, _ in _sev(src, "run.sh")] == [sev], gpus
    # a GPU and DataLoader workers: ML although the image says nothing
    src = b"docker run --gpus all acme/trainer:1 python train.py --workers 8\n"
    assert _sev(src, "run.sh") == [("warning", "safe", None)]
    assert _sev(src.replace(b"--gpus all ", b""), "run.sh") == []
    compose = (
        b"services:\n  train:\n    image: pytorch/pytorch\n"
        b"    command: python train.py dataloader.num_workers=0\n"
        b"    deploy:\n      resources:\n        reservations:\n          devices:\n"
        b"            - {driver: nvidia, count: 1, capabilities: [gpu]}\n"
    )
    ((sev, _, why),) = _sev(compose, "compose.yaml")
    assert sev == "info" and why is not None and why.startswith("dataloader.num_workers=0 ")
    ((sev, _, _),) = _sev(compose.replace(b"count: 1", b"count: all"), "compose.yaml")
    assert sev == "warning"


# Issue 21, "the default is not a fix": a size at or below the runtimes' 64 MiB default.
PYTORCHJOB_64M = b"""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-simple
  namespace: kubeflow
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              volumeMounts:
                - name: dshm
                  mountPath: /dev/shm
          volumes:
            - name: dshm
              emptyDir:
                medium: Memory
                sizeLimit: 64m
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              volumeMounts:
                - name: dshm
                  mountPath: /dev/shm
          volumes:
            - name: dshm
              emptyDir:
                medium: Memory
                sizeLimit: 64m
"""


def _at_default(src: bytes, name: str) -> list[tuple[str | None, str, str | None]]:
    out = []
    for f in check_loaded(load_bytes(src, name)).findings:
        if f.code == "SHM001":
            edits = f.fix.edits if f.fix is not None else ()
            at = "at or below the runtime's default" in f.message
            out.append(
                ("default" if at else None, f.severity.value, edits[0].content if edits else None)
            )
    return out


def test_pytorchjob_worker_64m_is_fixed_to_the_policy_size_never_64mi() -> None:
    r = fix_file(PYTORCHJOB_64M, "pytorchjob.yaml")
    # SHM004 reads 64m as the 64Mi meant, then 64Mi is the default: SHM001 writes 1Gi
    assert r.data == PYTORCHJOB_64M.replace(b"sizeLimit: 64m", b"sizeLimit: 1Gi")
    assert [f.code for f in r.applied] == ["SHM004", "SHM004", "SHM001", "SHM001"]
    assert b"64Mi" not in r.data
    assert fix_file(r.data, "pytorchjob.yaml").applied == ()  # idempotent
    at_default = PYTORCHJOB_64M.replace(b"sizeLimit: 64m", b"sizeLimit: 64Mi")
    assert _at_default(at_default, "pytorchjob.yaml") == [("default", "warning", "1Gi")] * 2
    above = PYTORCHJOB_64M.replace(b"sizeLimit: 64m", b"sizeLimit: 128Mi")
    assert _at_default(above, "pytorchjob.yaml") == []


def test_compose_and_run_line_sizes_at_the_default() -> None:
    compose = (
        b"services:\n  train:\n    image: nvcr.io/nvidia/pytorch:24.01-py3\n"
        b'    shm_size: "64m"\n    command: torchrun --nproc-per-node 8 train.py\n'
    )
    assert _at_default(compose, "compose.yaml") == [("default", "warning", "1g")]
    assert fix_file(compose, "compose.yaml").data == compose.replace(b'"64m"', b'"1g"')
    for size in (b"64m", b"32m", b"67108864", b"65536000"):  # Podman's 65,536,000 too
        line = b"podman run --device nvidia.com/gpu=all --shm-size=" + size
        line += b" pytorch/pytorch torchrun --nproc-per-node 2 train.py\n"
        assert _at_default(line, "run.sh") == [("default", "warning", "1g")], size
    bigger = b"docker run --gpus all --shm-size=65m pytorch/pytorch python train.py\n"
    assert _at_default(bigger, "run.sh") == []
    # not ML: a database's small /dev/shm is its own business
    assert _at_default(b"docker run --shm-size=64m postgres:16\n", "run.sh") == []


def test_no_room_for_a_larger_size_gives_no_edit_and_no_fix_writes_64mi() -> None:
    # 1Gi limit, 1 GiB margin: the cap would be the 64 MiB default, which a fix never writes
    src = (
        PYTORCHJOB_64M.replace(b"sizeLimit: 64m", b"sizeLimit: 64Mi")
        .replace(
            b"              volumeMounts:\n",
            b"              resources: {limits: {memory: 1Gi}}\n              volumeMounts:\n",
            2,
        )
        .replace(b"resources: {limits: {memory: 1Gi}}", b"resources: {}", 1)
    )
    assert _at_default(src, "pytorchjob.yaml") == [
        ("default", "warning", "1Gi"),
        ("default", "warning", None),
    ]
    plain = b"docker run --gpus all --memory=1g pytorch/pytorch torchrun train.py\n"
    assert _at_default(plain, "run.sh") == [(None, "warning", None)]

"""The command's arguments as workload evidence (sources/workload.py): DataLoader worker counts,
processes per node, and the GPU count each source gives."""

from __future__ import annotations

import pytest

from shmguard.sources.detect import run_gpu_count
from shmguard.sources.workload import PER_GPU, Args, classify, command_args, no_shm_need, strong


@pytest.mark.parametrize(
    ("command", "workers"),
    [
        ("python train.py --workers 0", (0, "--workers 0")),
        ("python train.py --workers=4", (4, "--workers=4")),
        ("python train.py --num-workers=0", (0, "--num-workers=0")),
        ("python train.py --num_workers 2", (2, "--num_workers 2")),
        ("python train.py --dataloader_num_workers 8", (8, "--dataloader_num_workers 8")),
        ("python train.py dataloader.num_workers=0", (0, "dataloader.num_workers=0")),
        ("python train.py data.train.num_workers=3 x", (3, "data.train.num_workers=3")),
        ("""python t.py --config '{"num_workers": 0, "lr": 1}'""", (0, "num_workers: 0")),
        ("python t.py --workers 0 --val-workers 2 --num_workers=6", (6, "--num_workers=6")),
    ],
)
def test_worker_counts(command: str, workers: tuple[int, str]) -> None:
    got = command_args(command)
    assert got is not None and got.workers == workers


def test_what_is_not_a_worker_count_or_a_process_count() -> None:
    for cmd in (
        "python train.py --workers ${NUM_WORKERS}",
        "python train.py --max_workers 4x",
        "python x.py --epochs 3",
        "python x.py --workers-file a",
    ):
        assert command_args(cmd) is None, cmd


def test_processes_per_node() -> None:
    assert command_args("torchrun --nproc-per-node 8 t.py") == Args(None, (8, "--nproc-per-node 8"))
    assert command_args("torchrun --nproc_per_node=gpu t.py") == Args(
        None, (PER_GPU, "--nproc_per_node=gpu")
    )
    got = command_args("accelerate launch --num_processes 2 t.py")
    assert got is not None and got.nproc == (2, "--num_processes 2")


@pytest.mark.parametrize(
    ("value", "count"),
    [("all", None), ("2", 2), ("1", 1), ('"device=0"', 1), ('"device=0,1"', 2), ("count=1", 1)],
)
def test_run_gpu_count(value: str, count: int | None) -> None:
    assert run_gpu_count(value) == count


def test_no_shm_need_needs_zero_workers_one_gpu_and_one_process() -> None:
    wl = classify(
        images=[("pytorch/pytorch", None)],
        commands=[("python t.py --workers=0", None)],
        gpus=[("GPU request 1", None)],
        gpu_count=1,
    )
    assert no_shm_need(wl) == (
        "--workers=0 starts no DataLoader worker and one GPU needs no NCCL shared memory "
        "inside the container"
    )
    for cmd, n in (
        ("python t.py --workers=4", 1),
        ("python t.py --workers=0", 2),
        ("python t.py --workers=0", None),  # --gpus all
        ("torchrun --nproc-per-node 2 t.py --workers=0", 1),
        ("python t.py", 1),
    ):
        wl = classify(
            images=[("pytorch/pytorch", None)],
            commands=[(cmd, None)],
            gpus=[("GPU", None)],
            gpu_count=n,
        )
        assert no_shm_need(wl) is None, (cmd, n)
    per_gpu = classify(
        images=[("pytorch/pytorch", None)],
        commands=[("torchrun --nproc-per-node gpu t.py --workers 0", None)],
        gpus=[("GPU", None)],
        gpu_count=1,
    )
    assert no_shm_need(per_gpu) is not None
    cpu = classify(images=[("pytorch/pytorch", None)], commands=[("python t.py --workers 0", None)])
    assert cpu.gpu_count == 0 and no_shm_need(cpu) is not None


def test_arguments_add_to_a_class_but_never_make_one() -> None:
    gunicorn = classify(images=[("acme/api", None)], commands=[("gunicorn --workers 4 app", None)])
    assert gunicorn.cls == "container" and not strong(gunicorn)
    gpu_only = classify(images=[("acme/trainer", None)], gpus=[("--gpus all", None)])
    assert gpu_only.cls == "ml" and not strong(gpu_only)
    trainer = classify(
        images=[("acme/trainer", None)],
        commands=[("python train.py --workers 8", None)],
        gpus=[("--gpus all", None)],
    )
    assert trainer.cls == "ml" and strong(trainer)
    assert [(e.kind, e.what) for e in trainer.evidence] == [
        ("args", "DataLoader workers: --workers 8"),
        ("gpu", "--gpus all"),
    ]

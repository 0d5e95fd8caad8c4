"""Look-alikes from the public-report corpus (tests/fixtures/corpus) that explain gets right:
host, cgroup, scheduler, launcher and notebook-platform OOM, a full disk that is not
/dev/shm, NCCL/Gloo networking, the memlock limit, truncated memory-mapped files, huge pages,
GPU memory (CUDA, TensorFlow, JAX, DALI) and a GPU kernel's on-chip shared memory. For each,
by id: the top result is the expected signature, its kind is accepted for the report's label,
and no result gives a /dev/shm size.

Only reports outside heldout.txt are listed; the held-out third is never read here."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import corpus_reports, diagnose_text, heldout_ids

from shmguard.triage.model import Signature
from shmguard.triage.scoring import accepts, score

#: report id -> the signature explain should rank first.
EXPECTED_TOP = {
    # Slurm, runc, DeepSpeed, Ray and DataLoader SIGKILL wordings of an OOM kill.
    "osc-kb-slurm-oom-kill-srun": "memory-oom-kill",
    "brainscore-950-slurm-oom-test": "memory-oom-kill",
    "nextflow-5932-oom-kill-new-wording": "memory-oom-kill",
    "snakemake-slurm-371-oom-kill-step": "memory-oom-kill",
    "kubeflow-trainer-1661-init-oom-limit-too-low": "memory-oom-kill",
    "deepspeed-4239-rc9-zero3-offload-dram": "memory-oom-kill",
    "ray-28778-memory-monitor-killed-actor": "memory-oom-kill",
    "mmrotate-501-killed-16g-ram": "memory-oom-kill",
    "rl-vigen-17-killed-memory-leak": "memory-oom-kill",
    "openpai-5464-oomkilled-137-request-memory": "memory-oom-kill",
    # ENOMEM at fork, and datasets map() workers that died.
    "jetson-inference-1026-fork-enomem": "memory-enomem",
    "mmdet-711-enomem-annotation-per-worker": "memory-enomem",
    "unsloth-7831-map-subprocess-died-rss": "datasets-map-worker-died",
    "unsloth-zoo-87-standardize-ram-full": "datasets-map-worker-died",
    "videosys-97-exited-600g-leak": "dataloader-worker-exited",
    # A disk that is not /dev/shm.
    "llamafactory-275-arrow-writer-system-disk": "disk-full-writer",
    "dolly-139-torch-save-enospc": "disk-full-writer",
    "docker-for-linux-214-inodes-libcontainerd-enospc": "disk-full",
    "dust-7395-ephemeral-1gi-evicted": "disk-full",
    "substratus-92-ephemeral-5gi-model-save": "disk-full",
    # Networking, memlock, mmap, huge pages, GPU memory.
    "nccl-1837-socket-ifname-missing": "nccl-network",
    "open-r1-mm-7-socket-ifname-eth0-hardcoded": "nccl-network",
    "cudf-spark-7632-ucx-ibv-create-cq-memlock": "memlock-limit",
    "ucx-8229-ibv-create-cq-memlock-64k": "memlock-limit",
    "paddleseg-3106-nnunet-mmap-length": "mmap-truncated",
    "k8s-71233-postgres-bus-error-hugepages": "postgres-hugepages-sigbus",
    "kubegres-132-initdb-bus-error-135-hugepages": "postgres-hugepages-sigbus",
    "freetoken-246-triton-smem-rtx20": "gpu-smem-limit",
    "vllm-8903-mllama-cuda-oom-ipc-host": "cuda-oom",
    # Collected after the held-out draw (reports_added.jsonl): SageMaker, TGI, Apptainer,
    # JAX and Colab wordings of a full disk, GPU memory and a cgroup OOM kill.
    "tgi-694-sagemaker-llama70b-download-storagefull": "disk-full",
    "sagemaker-examples-1069-local-mode-tmp-enospc": "disk-full",
    "apptainer-546-pull-tmp-bundle-blob-enospc": "disk-full",
    "afprofile-8-jax-resource-exhausted-3080ti": "cuda-oom",
    "opennmt-tutorial-6-colab-worker-killed-cgroup": "memory-oom-kill",
    # Colab's own RAM message, DALI's and TensorFlow's GPU allocators, TensorFlow's CPU one.
    "mesh-transformer-jax-120-colab-session-ram": "memory-oom-kill",
    "dali-1137-imagedecoder-cant-allocate-device": "cuda-oom",
    "dali-2836-imagedecoder-cuda-allocation-failed": "cuda-oom",
    "tf-136-mnist-eval-resourceexhausted-gpu": "cuda-oom",
    "darkflow-873-tf-cpu-allocator-oom": "memory-enomem",
}


HELDOUT = heldout_ids()
REPORTS = {i: r for i, r in corpus_reports().items() if i in EXPECTED_TOP and i not in HELDOUT}


def test_every_listed_report_exists_and_is_not_held_out() -> None:
    assert not set(EXPECTED_TOP) & HELDOUT
    assert set(REPORTS) == set(EXPECTED_TOP)


@pytest.mark.parametrize("rid", sorted(EXPECTED_TOP))
def test_lookalike_report_is_explained_without_shm_size(
    rid: str, catalogue: Sequence[Signature]
) -> None:
    r = REPORTS[rid]
    d = diagnose_text(str(r["log"]), catalogue)
    assert d.results, "nothing matched"
    top = d.results[0]
    assert top.id == EXPECTED_TOP[rid]
    assert {top.kind, *top.also} & accepts(str(r["kind"]))
    s = score(r, d)
    assert s.right and s.lookalike
    assert s.shm_advice is False

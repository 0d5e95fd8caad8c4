"""The runtime explain reads from the corpus logs (tests/fixtures/corpus) matches the report's
``runtime`` for every report whose log shows one; each report labelled with a runtime its
log does not show is listed below with the reason. The formerly held-out third is included
(it was scored once, 2026-12-01)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _triage_helpers import corpus_reports, diagnose_text

from shmguard.triage.model import Signature

REPORTS = corpus_reports()

_NO_MARKER = "no line of the log names a runtime: the label comes from the thread"
_HINT = (
    "only a tool's advice for Docker users ('If you are inside a Docker container...'), "
    "which the tool prints wherever it runs"
)

#: Labelled with a runtime the log itself does not show: report id -> why (explain says
#: None for these, never another runtime).
UNSHOWN = {
    "videodiff-speedrun-2-nccl-shm-1g": _NO_MARKER + " (one NCCL line, no hostname)",
    "cudf-spark-7632-ucx-ibv-create-cq-memlock": _NO_MARKER + " (one UCX line)",
    "hugectr-backend-42-sigbus-ncclgroupend": _NO_MARKER + " (hostname replaced by host1)",
    "model-analyzer-749-inner-container-shm": _HINT + " (Triton)",
    "xinference-2945-sglang-multinode-shm": _NO_MARKER + " (one NCCL error line)",
    "vllm-8903-mllama-cuda-oom-ipc-host": _NO_MARKER + " (a vLLM worker's CUDA OOM)",
    "llm-d-352-nccl-shm-leak-crashloop": _NO_MARKER + " (vLLM's traceback only)",
    "moby-4981-intel-mpi-linpack-enospc": _NO_MARKER + " (strace lines)",
    "ray-3223-docker-memory-tmp-fallback": _HINT + " (Ray)",
    "pytorch-ci-infra-490-runner-pod-shm": _NO_MARKER + " (NCCL lines, hostname runner-workflow)",
    "ai-cloud-validation-643-ucx-fifo-segv": _NO_MARKER + " (UCX lines)",
    "triton-4644-client-server-ipc-namespace": _NO_MARKER + " (a tritonclient traceback)",
    "reppoints-18-ipc-host-modified-container": _NO_MARKER + " (torch's bus error line)",
    "pytorchocr-137-docker-bs-shm": _NO_MARKER + " (torch's bus error line)",
    "paddlespeech-790-docker-ipc-host": _NO_MARKER + " (Paddle's bus error line)",
    "textymcspeechy-66-compose-shm-1g": _NO_MARKER + " (torch's errors, no service prefix)",
    "pt-1355-docker-shm-deadlock": _NO_MARKER + " (a df line, hostname replaced by host1)",
    "kuberay-201-object-store-gt-shm-requests": _HINT + " (Ray, in a KubeRay pod)",
    "kfp-6880-containerop-no-dshm": _NO_MARKER + " (torch's bus error line)",
    "k8s-71233-postgres-bus-error-hugepages": _NO_MARKER + " (PostgreSQL initdb output)",
    "kubegres-132-initdb-bus-error-135-hugepages": _NO_MARKER + " (PostgreSQL initdb output)",
    "xpk-492-jobset-a3mega-nccl-shm": _NO_MARKER + " (an XLA error line)",
    "dlrover-1046-nanogpt-ckpt-sigbus-shm": _NO_MARKER + " (torch elastic's failure summary)",
    "sglang-38638-ipc-host-leaked-shm-sigbus": _NO_MARKER + " ('Bus error (core dumped)')",
    "prime-rl-2331-slurm-stale-state-dp-hang": _NO_MARKER + " (one vLLM waiting line)",
    # The formerly held-out third.
    "vllm-19613-buffsize-ibv-reg-enomem": _NO_MARKER + " (vLLM's and cupy's NCCL traceback)",
    "rocm-systems-3700-ucx-posix-oom-bus": _NO_MARKER + " (two UCX lines)",
    "ray-14535-autoscaler-shm-under-load": _NO_MARKER + " (Ray's object store error)",
    "llmaz-238-ray-multihost-k8s-shm": _NO_MARKER + " (Ray's /tmp fallback warning)",
    "nccl-docs-systemd-removeipc-unlink": _NO_MARKER + " (one NCCL WARN line)",
    "ray-3029-reducing-object-store-0gb": _NO_MARKER + " (Ray's object store warning)",
    "codalab-1961-bundle-shm-500mb": _NO_MARKER + " (torch's bus error line)",
    "inseefr-helm-16-truncated-dataloader-shm": _NO_MARKER + " (torch's hint, cut off)",
    "ecs-agent-2324-fargate-shm-permission": _NO_MARKER + " (Firefox's shm warnings)",
    "kamal-766-unknown-flag-shm-underscore": _NO_MARKER
    + " (kamal's 'docker stderr:' prefix; the unknown-flag error is Docker's and Podman's)",
    "engibench-180-apptainer-writable-tmpfs-64mib": _NO_MARKER + " (a Python ENOSPC traceback)",
    "k3s-2392-daemon-default-shm-ignored-pods": _NO_MARKER + " (one df row)",
    "lightly-487-docker-errno24-ulimit-nofile": _NO_MARKER + " (one errno 24 line)",
    "sagemaker-toolkit-204-checkpoints-disk-100": _NO_MARKER
    + " (a CloudWatch stream name, algo-1-..., not yet a marker)",
    "moby-35271-swarm-tmpfs-dev-shm-size-regression": _NO_MARKER + " (df output)",
}

#: Labelled without a runtime, but the log shows one (explain names it from these lines).
SHOWN_UNLABELLED = {
    # [fd7fd1d78666:03983] Signal: Bus error (7): Open MPI in a container (BOUT++'s CI
    # container); a container-ID hostname, a hint only.
    "bout-2742-openmpi-vader-segment-bus": ("docker", "low"),
}

LABELLED = sorted(i for i, r in REPORTS.items() if r["runtime"] is not None)


def test_lists_name_reports_that_exist() -> None:
    assert set(UNSHOWN) <= set(LABELLED)
    assert set(SHOWN_UNLABELLED) <= {i for i, r in REPORTS.items() if r["runtime"] is None}


@pytest.mark.parametrize("rid", LABELLED)
def test_runtime_matches_the_label(catalogue: Sequence[Signature], rid: str) -> None:
    r = REPORTS[rid]
    d = diagnose_text(r["log"], catalogue)
    if rid in UNSHOWN:
        assert d.runtime is None, f"{rid}: now shows {d.runtime}; drop it from UNSHOWN"
        return
    assert d.runtime == r["runtime"], rid
    assert d.runtime_source == "log" and d.runtime_evidence, rid


@pytest.mark.parametrize("rid", sorted(i for i, r in REPORTS.items() if r["runtime"] is None))
def test_unlabelled_reports_get_no_runtime_unless_their_log_shows_one(
    catalogue: Sequence[Signature], rid: str
) -> None:
    d = diagnose_text(REPORTS[rid]["log"], catalogue)
    assert (d.runtime, d.runtime_confidence) == SHOWN_UNLABELLED.get(rid, (None, None)), rid


def test_fix_of_a_labelled_report_is_for_its_runtime_first(
    catalogue: Sequence[Signature],
) -> None:
    checked = 0
    for rid in LABELLED:
        if rid in UNSHOWN:
            continue
        d = diagnose_text(REPORTS[rid]["log"], catalogue)
        fixes = [r.fix for r in d.results if r.fix is not None and r.fix.changes]
        for fix in fixes:
            assert fix.changes[0].runtimes[0] == d.runtime, rid
            checked += 1
    assert checked >= 5

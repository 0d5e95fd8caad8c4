"""GitHub Actions workflows and GitLab CI files: job and service containers read as the
`docker run` they amount to, and run lines in `run:` steps and `script:` lines, on a real
workflow (tests/fixtures/ci/SOURCES.tsv)."""

from __future__ import annotations

from pathlib import Path

from shmguard.lint.check import check_loaded, fix_file
from shmguard.sources.load import load_bytes, load_path

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ci"


def _found(data: bytes, name: str) -> list[tuple[str, int, str]]:
    r = check_loaded(load_bytes(data, name))
    assert r.diagnostics == ()
    out = []
    for f in r.findings:
        assert f.location is not None
        app = f.fix.applicability.value if f.fix is not None else "none"
        out.append((f.code, f.location.line or 0, app))
    return out


def test_real_workflow_job_container_options() -> None:
    good = FIXTURES / "transformers-doctest_job.yml"
    lf = load_path(str(good))
    assert lf.kind == "github-actions"
    (ci,) = lf.ci
    (c,) = ci.containers
    assert c.job == "run_doctests" and c.run is not None
    assert [(f.name, f.value) for f in c.run.flags] == [
        ("--gpus", "0"),
        ("--shm-size", "16gb"),
        ("--ipc", "host"),
        ("--volume", "/mnt/cache/.cache/huggingface:/mnt/cache/"),
    ]
    # the real file: --shm-size is ignored beside --ipc host
    assert _found(good.read_bytes(), str(good)) == [("SHM011", 34, "display-only")]


def test_unsized_container_gets_shm001_and_the_flag_appended_to_options() -> None:
    bad = (FIXTURES / "transformers-doctest_job-unsized.yml").read_bytes()
    assert _found(bad, "doctest_job.yml") == [("SHM001", 33, "safe")]
    r = fix_file(bad, ".github/workflows/doctest_job.yml")
    assert r.data == bad.replace(
        b"-v /mnt/cache/.cache/huggingface:/mnt/cache/\n",
        b"-v /mnt/cache/.cache/huggingface:/mnt/cache/ --shm-size=1g\n",
    )
    assert fix_file(r.data, "doctest_job.yml").applied == ()


WORKFLOW = b"""name: GPU tests
on:
  push:
    branches: [main]
jobs:
  train:
    runs-on: [self-hosted, gpu]
    container:
      image: nvcr.io/nvidia/pytorch:24.01-py3
      options: >-
        --gpus all
        --ulimit memlock=-1
    services:
      triton:
        image: nvcr.io/nvidia/tritonserver:24.01-py3
        options: "--gpus all"
      redis:
        image: redis
        options: --health-cmd "redis-cli ping"
    steps:
      - uses: actions/checkout@v4
      - name: smoke
        run: |
          docker run --rm --gpus all pytorch/pytorch python -c "import torch"
  cpu:
    runs-on: ubuntu-latest
    container: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
    steps:
      - run: python train.py --workers 4
  plain:
    runs-on: ubuntu-latest
    container:
      image: vllm/vllm-openai:v0.6.0
"""


def test_workflow_shapes_and_their_fixes() -> None:
    assert [g[:2] for g in _found(WORKFLOW, "ci.yml")] == [
        ("SHM001", 9),  # the job container: a folded options scalar
        ("SHM001", 15),  # the Triton service: quoted options
        ("SHM001", 24),  # docker run in a run: step
        ("SHM001", 27),  # an image given as a string
        ("SHM001", 33),  # no options at all
    ]
    r = fix_file(WORKFLOW, "ci.yml")
    assert r.data == (
        WORKFLOW.replace(b"memlock=-1\n", b"memlock=-1 --shm-size=1g\n")
        .replace(b'"--gpus all"', b'"--gpus all --shm-size=1g"')
        .replace(b"docker run --rm", b"docker run --shm-size=1g --rm")
        .replace(
            b"container: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            b"container: {image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime, "
            b"options: --shm-size=1g}",
        )
        .replace(
            b"      image: vllm/vllm-openai:v0.6.0\n",
            b"      image: vllm/vllm-openai:v0.6.0\n      options: --shm-size=1g\n",
        )
    )
    assert fix_file(r.data, "ci.yml").applied == ()
    assert _found(r.data, "ci.yml") == []


GITLAB = b"""stages: [build, train]

variables:
  IMAGE: nvcr.io/nvidia/pytorch:24.01-py3

build:
  stage: build
  image: docker:24.0.5
  services: [docker:24.0.5-dind]
  script:
    - docker build -t trainer .

train:
  stage: train
  image: docker:24.0.5
  before_script:
    - docker info
  script:
    - docker run --rm --gpus all nvcr.io/nvidia/pytorch:24.01-py3 torchrun --nproc-per-node 8 t.py
    - |
      docker run --rm --gpus all --ipc=host \\
        nvcr.io/nvidia/pytorch:24.01-py3 python eval.py
"""


def test_gitlab_ci_script_lines() -> None:
    lf = load_bytes(GITLAB, ".gitlab-ci.yml")
    assert lf.kind == "gitlab-ci" and len(lf.run_lines) == 2
    assert _found(GITLAB, ".gitlab-ci.yml") == [("SHM001", 19, "safe")]
    r = fix_file(GITLAB, ".gitlab-ci.yml")
    assert r.data == GITLAB.replace(
        b"    - docker run --rm --gpus all nvcr",
        b"    - docker run --shm-size=1g --rm --gpus all nvcr",
    )
    # a job's own image runs under the runner (its shm_size is in the runner's config.toml)
    job_only = b"stages: [t]\nt:\n  image: pytorch/pytorch\n  script:\n    - python train.py\n"
    assert load_bytes(job_only, ".gitlab-ci.yml").kind == "gitlab-ci"
    assert _found(job_only, ".gitlab-ci.yml") == []

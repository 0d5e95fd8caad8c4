"""The names that mark a workload class: image tokens and command phrases, as data.

This is the one list. :mod:`shmguard.sources.tokenmatch` reads it twice: to match an image
reference or a command line in Python (``check``, the webhook, ``check --cluster``) and to
compile the regular expressions the generated CEL and Rego policies carry
(:data:`~shmguard.sources.tokenmatch.IMAGE_PATTERN`, ``COMMAND_PATTERN``), so both give one
answer.

An image token is written as an image reference would be (``[registry/][namespace/]name``):

* ``pytorch``, ``text-generation-inference``: a *name*: its tokens (split on ``-``, ``_``,
  ``.``) match a run of whole tokens inside one component of an image's namespace path or
  repository name (``nvcr.io/nvidia/pytorch:24.01-py3`` by its repository ``pytorch``,
  ``pytorch/torchserve`` by its namespace, ``LLaMA_Factory`` by ``llama-factory``), never a
  part of a token (``sharelatex/overleaf`` holds no token ``verl``) and never the registry or
  the tag;
* ``rayproject/ray``, ``nvcr.io/nvidia/dgl``: a name under a namespace (and a registry when
  one is written): the image's namespace path starts with exactly those components (on any
  registry, or on that one) and the name matches in a component after them
  (``rayproject/ray-llm``; not ``acme/ray``).

The tag names a variant (``latest-gpu``, ``cpu-1.7``) and is not matched, except for a name
marked ``tag`` followed by its version (``torch1.6.0``): a tag that lists the frameworks the
image bundles, the only image of the corpus the old substring patterns found by its tag alone.

A command phrase (``torchrun``, ``accelerate launch``, ``sglang.launch_server``, ``-m torch``)
matches where the command line holds it, each space standing for any run of whitespace, with
no letter or digit right before or after it (``mytorchrun`` and ``torchrun2`` hold none).

Each entry carries the class it means (:data:`CLASSES`): every entry of :data:`IMAGE_TOKENS`
and :data:`COMMAND_TOKENS` means ``ml`` (the lists the generated policies compile: the
webhook and the policies size ML pods); :data:`PROGRAM_IMAGE_TOKENS` and
:data:`PROGRAM_COMMAND_TOKENS` mean ``browser`` or ``database`` (``check`` reports them:
SHM001's ``browser`` and ``database`` variants). A class is added by naming it in
:data:`CLASSES` (and in :data:`shmguard.config.WORKLOADS`, where severities are keyed by
class) and adding its entries. Entries are kept
to what detection found before tokens (issue 19): each substring the old patterns matched in
the corpus (../shared/corpus) that is a real name of an ML framework or server is an entry
here (``torchserve``, ``bionemo``, ``nemotron``, ``djl-inference``, ...). ``nemotron`` is
NVIDIA's model family, a word of its own: ``acme/nemotron-notes`` is ML by it, as the NIM
servers named by it are; ``acme/mnemonic-api`` holds no token ``nemo`` at all.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Workload classes detection can give, most telling first: a container with evidence of
#: several classes is the first of them. ``container`` (no evidence) is not listed. ``ml``
#: comes from :data:`IMAGE_TOKENS` and :data:`COMMAND_TOKENS` (and environment variables and
#: accelerator requests); ``browser`` and ``database`` only from :data:`PROGRAM_IMAGE_TOKENS`
#: and :data:`PROGRAM_COMMAND_TOKENS`, asked of an image or command with no ML token.
CLASSES: tuple[str, ...] = ("ml", "browser", "database")

#: The /dev/shm a class's own vendor documents, as (bytes, basis): the size decision's
#: ``documented`` slot (:class:`~shmguard.estimate.decide.Documented`). docker-selenium's README
#: runs every browser image with ``--shm-size="2g"`` ("This is a known workaround to avoid the
#: browser crashing inside a docker container"); PostgreSQL documents none (its dynamic shared
#: memory grows with parallel workers and work_mem): the policy's default applies.
DOCUMENTED_SHM: dict[str, tuple[int, str]] = {
    "browser": (
        2 << 30,
        "docker-selenium runs its browser images with --shm-size=2g (Chrome and Firefox keep "
        "renderer and compositor memory in /dev/shm)",
    ),
}


@dataclass(frozen=True)
class Token:
    """One entry: ``text`` as written (an image name, ``namespace/name`` or
    ``registry/namespace/name``; or a command phrase), the workload class it means (one of
    :data:`CLASSES`) and what it names (for the docs and tests). ``tag``: an image name that
    also counts in the tag, as the version of what the image holds (``torch1.6.0`` in
    ``horovod/horovod:0.20.0-tf2.3.0-torch1.6.0-mxnet1.5.0-py3.7-cpu``): a tag token that is
    the name followed by a digit."""

    text: str
    cls: str
    what: str
    tag: bool = False


def _ml(text: str, what: str) -> Token:
    return Token(text, "ml", what)


IMAGE_TOKENS: tuple[Token, ...] = (
    Token(
        "pytorch",
        "ml",
        "PyTorch images (pytorch/pytorch, nvcr.io/nvidia/pytorch, rocm/pytorch)",
        tag=True,
    ),
    Token("torch", "ml", "PyTorch (and torch1.6.0 in horovod/horovod's tags)", tag=True),
    _ml("torchserve", "TorchServe"),
    _ml("torchelastic", "TorchElastic (torchelastic/examples)"),
    _ml("torchtune", "torchtune (Kubeflow Trainer's torchtune-trainer)"),
    _ml("vllm", "vLLM (vllm/vllm-openai, rocm/vllm, opea/vllm-gaudi)"),
    _ml("vllmserver", "KServe's vLLM server image (vllmserver)"),
    _ml("sglang", "SGLang (lmsysorg/sglang)"),
    _ml("tritonserver", "NVIDIA Triton Inference Server (nvcr.io/nvidia/tritonserver)"),
    _ml("triton", "Triton Inference Server images named triton_*"),
    _ml("deepspeed", "DeepSpeed"),
    _ml("huggingface", "Hugging Face images (huggingface/transformers-pytorch-gpu, TGI, TEI)"),
    _ml("huggingfaceserver", "KServe's Hugging Face server (kserve/huggingfaceserver)"),
    _ml("text-generation-inference", "Hugging Face TGI"),
    _ml("text-embeddings-inference", "Hugging Face TEI"),
    _ml("lmdeploy", "LMDeploy (openmmlab/lmdeploy)"),
    _ml("nemo", "NVIDIA NeMo (nvcr.io/nvidia/nemo, nemo-microservices)"),
    _ml("bionemo", "NVIDIA BioNeMo (nvcr.io/nvidia/clara/bionemo-framework)"),
    _ml("nemotron", "NVIDIA Nemotron model servers (NIM)"),
    _ml("nemoguard", "NVIDIA NemoGuard model servers (NIM)"),
    _ml("nemoretriever", "NVIDIA NeMo Retriever model servers (NIM)"),
    _ml("megatron", "Megatron-LM"),
    _ml("rayproject/ray", "Ray (rayproject/ray, rayproject/ray-ml, rayproject/ray-llm)"),
    _ml("axolotl", "Axolotl (axolotlai/axolotl)"),
    _ml("llama-factory", "LLaMA-Factory"),
    _ml("llamafactory", "LLaMA-Factory (hiyouga/llamafactory)"),
    _ml("openrlhf", "OpenRLHF"),
    _ml("verl", "verl (verlai/verl)"),
    _ml("djl-serving", "DJL Serving (deepjavalibrary/djl-serving)"),
    _ml("djl-inference", "AWS Large Model Inference (DJL) containers"),
    _ml("tensorrt", "TensorRT and TensorRT-LLM"),
    _ml("nvcr.io/nvidia/dgl", "NVIDIA DGL container"),
    _ml("nvcr.io/nvidia/modulus", "NVIDIA Modulus container"),
)

COMMAND_TOKENS: tuple[Token, ...] = (
    _ml("torchrun", "PyTorch's distributed launcher"),
    _ml("torch.distributed.run", "python -m torch.distributed.run"),
    _ml("torch.distributed.launch", "python -m torch.distributed.launch"),
    _ml("-m torch", "python -m torch.<module>"),
    _ml("accelerate launch", "Hugging Face Accelerate"),
    _ml("deepspeed", "the DeepSpeed launcher (and --deepspeed)"),
    _ml("vllm serve", "vLLM's server"),
    _ml("vllm.entrypoints", "python -m vllm.entrypoints.openai.api_server"),
    _ml("sglang.launch_server", "python -m sglang.launch_server"),
    _ml("text-generation-launcher", "Hugging Face TGI's launcher"),
    _ml("tritonserver", "NVIDIA Triton Inference Server"),
    _ml("lmdeploy serve", "LMDeploy's server"),
    _ml("torchserve", "TorchServe"),
    _ml("ray start", "a Ray node"),
)


def _browser(text: str, what: str) -> Token:
    return Token(text, "browser", what)


def _database(text: str, what: str) -> Token:
    return Token(text, "database", what)


#: Images of programs that live on /dev/shm besides ML (issue 22): browsers that tests drive
#: (a renderer crashes in 64 MiB: "session deleted because of page crash", "Target crashed")
#: and PostgreSQL (dynamic shared memory for parallel query: "could not resize shared memory
#: segment"). Matched as :data:`IMAGE_TOKENS` are, by token; ``selenium/hub`` (the grid's
#: router, no browser) and ``cypress/factory`` (a Dockerfile helper) are no entries.
PROGRAM_IMAGE_TOKENS: tuple[Token, ...] = (
    _browser("selenium/standalone", "Selenium standalone browsers (standalone-chrome, -firefox)"),
    _browser("selenium/node", "Selenium Grid browser nodes (node-chrome, node-edge, ...)"),
    _browser("seleniarm/standalone", "Selenium's arm64 standalone browsers"),
    _browser("seleniarm/node", "Selenium's arm64 Grid browser nodes"),
    _browser("cypress/included", "Cypress with its browsers (cypress/included)"),
    _browser("cypress/browsers", "Cypress base with Chrome, Firefox, Edge (cypress/browsers)"),
    _browser("cypress/base", "Cypress base (Electron, a Chromium)"),
    _browser("playwright", "Playwright (mcr.microsoft.com/playwright, playwright/python)"),
    _browser("puppeteer", "Puppeteer (ghcr.io/puppeteer/puppeteer)"),
    _browser("browserless", "browserless (browserless/chrome, ghcr.io/browserless/chromium)"),
    _browser("alpine-chrome", "zenika/alpine-chrome"),
    _browser("headless-shell", "chromedp/headless-shell"),
    _database("postgres", "PostgreSQL (postgres, supabase/postgres, crunchy-postgres)"),
    _database("postgresql", "PostgreSQL (bitnami/postgresql, cloudnative-pg/postgresql)"),
    _database("postgis", "PostGIS (postgis/postgis)"),
    _database("timescaledb", "TimescaleDB (timescale/timescaledb)"),
)

#: Words in an image's namespace or name that make a program token name a tool beside the
#: program, not the program (``prometheuscommunity/postgres-exporter``,
#: ``crunchydata/postgres-operator``, ``acme/postgres-backup-s3``, ``selenium/node-docker``
#: starts browsers in other containers).
NOT_PROGRAM_WORDS: tuple[str, ...] = (
    "exporter",
    "operator",
    "backup",
    "client",
    "proxy",
    "migrate",
    "migrations",
    "docker",
    "recorder",
)

#: Command phrases of the same programs: a test runner that starts a browser.
PROGRAM_COMMAND_TOKENS: tuple[Token, ...] = (
    _browser("playwright test", "Playwright's test runner (npx playwright test)"),
    _browser("cypress run", "Cypress's test runner"),
)

__all__ = [
    "CLASSES",
    "COMMAND_TOKENS",
    "DOCUMENTED_SHM",
    "IMAGE_TOKENS",
    "NOT_PROGRAM_WORDS",
    "PROGRAM_COMMAND_TOKENS",
    "PROGRAM_IMAGE_TOKENS",
    "Token",
]

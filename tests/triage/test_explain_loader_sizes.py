"""explain sizes a DataLoader failure from the loader its inputs show (issue 22 item 2): the
size ``plan`` gives for that loader, through the one size decision; when the inputs show no
loader and no size, the sizing policy's default with the pointers to measure it (never the
8 GiB the DataLoader signatures document); a memory limit the log shows follows the same
decision (``Sized.memory_limit``)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _triage_helpers import CORPUS, FIXTURES, diagnose_text
from typer.testing import CliRunner

from shmguard.cli import app
from shmguard.estimate.plan import PlanRequest, make_plan
from shmguard.estimate.policy import Policy, default_shm_size
from shmguard.fix.snippets import fix_snippets
from shmguard.triage import explain_streams
from shmguard.triage.fixes import MODELLED_KINDS, PLAN_HINT
from shmguard.triage.loader_seen import LoaderSeen
from shmguard.triage.model import Diagnosis, FixPlan, Signature
from shmguard.units import GiB, MiB

BUS = (
    "RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error. It is "
    "possible that dataloader's workers are out of shared memory. Please try to raise your "
    "shared memory limit.\n"
)
ALLOC = (
    "RuntimeError: unable to allocate shared memory(shm) for file </torch_22128_2334166919_0>:"
    " No space left on device (28)\n"
)
S01 = FIXTURES / "torch_2.13" / "S01_f32_bs32_nw4.txt"


def seen(*lines: str) -> LoaderSeen:
    out = LoaderSeen()
    for i, text in enumerate(lines, 1):
        out.add("log", i, text)
    return out


def dataloader_fix(d: Diagnosis) -> FixPlan:
    """The fix of the first DataLoader-kind result."""
    r = next(r for r in d.results if r.kind in MODELLED_KINDS and r.fix is not None)
    assert r.fix is not None
    return r.fix


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ("DataLoader(ds, batch_size=32, num_workers=4)", "x: torch.Size([32, 3, 224, 224])"),
            PlanRequest(4, batch_size=32, sample_shape=(3, 224, 224)),
        ),
        (
            ('{"num_workers": 8, "prefetch_factor": 4}', "torch.Size([16, 3, 512, 512])"),
            PlanRequest(8, batch_size=16, sample_shape=(3, 512, 512), prefetch_factor=4),
        ),
        (
            ("  num_workers: 2", "dtype=torch.uint8 shape torch.Size([64, 3, 96, 96])"),
            PlanRequest(2, batch_size=64, sample_shape=(3, 96, 96), dtype="uint8"),
        ),
        (
            # PyTorch's own warning; torchrun's local ranks; the largest tensor is the batch
            (
                "UserWarning: This DataLoader will create 6 worker processes in total. Our "
                "suggested max number of worker in current system is 2",
                "torchrun --nproc_per_node=8 train.py --num-workers 3",
                "labels torch.Size([32]) images torch.Size([32, 3, 224, 224])",
                "logits torch.Size([32, 1000])",
            ),
            PlanRequest(6, batch_size=32, sample_shape=(3, 224, 224), local_ranks=8),
        ),
        (
            # a manifest given with the log: the annotation check --fix and the webhook read
            ('    shmguard.io/dataloader: "num_workers=4,batch_size=8,sample_shape=3x64x64"',),
            PlanRequest(4, batch_size=8, sample_shape=(3, 64, 64)),
        ),
    ],
)
def test_the_loader_the_lines_show(lines: tuple[str, ...], expected: PlanRequest) -> None:
    got = seen(*lines).request()
    assert got is not None and got[0] == expected


@pytest.mark.parametrize(
    "lines",
    [
        ("num_workers=4",),  # workers without a batch shape
        ("torch.Size([32, 3, 224, 224])",),  # a batch without workers
        ("self.pa_writer.write_table(pa_table, writer_batch_size)", "torch.Size([4, 4])"),
        # Paddle's hint names the parameter without a value
        (
            "queue capacity is set as 2 times of the max value of num_workers and len(places).",
            "torch.Size([32, 3, 224, 224])",
        ),
    ],
)
def test_too_little_shows_no_loader(lines: tuple[str, ...]) -> None:
    assert seen(*lines).request() is None


@pytest.mark.parametrize(
    "request_",
    [
        PlanRequest(4, batch_size=32, sample_shape=(3, 224, 224)),
        PlanRequest(2, batch_size=8, sample_shape=(3, 224, 224)),
        PlanRequest(4, batch_size=32, sample_shape=(3, 224, 224), dtype="uint8"),
        PlanRequest(8, batch_size=64, sample_shape=(3, 384, 384), prefetch_factor=4),
        PlanRequest(16, batch_size=256, sample_shape=(3, 224, 224)),
    ],
)
@pytest.mark.parametrize("failure", [BUS, ALLOC], ids=["bus-error", "alloc-failed"])
def test_explain_gives_what_plan_gives_for_the_loader_the_log_shows(
    catalogue: Sequence[Signature], request_: PlanRequest, failure: str
) -> None:
    assert request_.sample_shape is not None and request_.batch_size is not None
    shape = ", ".join(str(d) for d in (request_.batch_size, *request_.sample_shape))
    log = (
        f"loader = DataLoader(train, batch_size={request_.batch_size}, "
        f"num_workers={request_.num_workers}, prefetch_factor={request_.prefetch_factor})\n"
        f"first batch: torch.Size([{shape}]) dtype=torch.{request_.dtype}\n" + failure
    )
    fix = dataloader_fix(diagnose_text(log, catalogue, runtime="docker"))
    planned = make_plan(request_).shm
    assert planned is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == planned.bytes and fix.shm_size.source == "model"
    assert fix.shm_size.basis.startswith("the DataLoader model (shmguard plan) for the loader")
    assert "log line 1" in fix.shm_size.basis and "log line 2" in fix.shm_size.basis
    assert PLAN_HINT not in fix.next


def test_plan_and_explain_give_the_same_bytes_through_their_commands(tmp_path: Path) -> None:
    # The same loader through `shmguard plan` and through `shmguard explain` of its failure
    # log: the verbatim torch 2.13 log of S01 (4 workers, PyTorch's own warning says so) with
    # the batch its script printed.
    log = tmp_path / "train.log"
    log.write_text("batch torch.Size([32, 3, 224, 224])\n" + S01.read_text())
    runner = CliRunner()
    r = runner.invoke(app, ["explain", "--json", str(log)])
    assert r.exit_code == 1, r.output
    size = json.loads(r.stdout)["results"][0]["fix"]["shm_size"]
    args = ["--batch-size", "32", "--sample-shape", "3,224,224", "--num-workers", "4"]
    r = runner.invoke(app, ["plan", *args, "--format", "json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert size["bytes"] == body["shm_size"] == 256 * MiB
    assert size["source"] == "model"
    assert "num_workers 4 (" in size["basis"] and "torch.Size([32, 3, 224, 224])" in size["basis"]


def test_a_config_given_with_the_log_shows_the_loader(
    catalogue: Sequence[Signature], tmp_path: Path
) -> None:
    # explain FILE... is one incident: the job's manifest beside its log gives the loader.
    manifest = (
        "metadata:\n  annotations:\n"
        '    shmguard.io/dataloader: "num_workers=8,batch_size=64,sample_shape=3x224x224"\n'
    )
    d = explain_streams(
        [("train.log", io.BytesIO(BUS.encode())), ("job.yaml", io.BytesIO(manifest.encode()))],
        signatures=catalogue,
    )
    fix = dataloader_fix(d)
    planned = make_plan(PlanRequest(8, batch_size=64, sample_shape=(3, 224, 224))).shm
    assert planned is not None and fix.shm_size is not None
    assert fix.shm_size.bytes == planned.bytes == 896 * MiB


def test_no_loader_and_no_size_gives_the_policy_default_and_the_pointers(
    catalogue: Sequence[Signature],
) -> None:
    for log in (BUS, ALLOC, S01.read_text()):
        fix = dataloader_fix(diagnose_text(log, catalogue))
        assert fix.shm_size is not None and fix.shm_size.source == "default"
        assert fix.shm_size.bytes == Policy().default_shm_size == GiB
        assert fix.shm_size.basis.startswith("the log shows no /dev/shm size and ")
        assert "`shmguard measure`" in fix.shm_size.basis
        assert PLAN_HINT in fix.next and any("`shmguard probe`" in s for s in fix.next)
    # what the log shows of the loader, when it is too little, is said
    fix = dataloader_fix(diagnose_text(S01.read_text(), catalogue))
    assert fix.shm_size is not None
    assert "num_workers 4 (log line 4) but no batch's torch.Size" in fix.shm_size.basis
    fix = dataloader_fix(diagnose_text(BUS, catalogue))
    assert fix.shm_size is not None
    assert "no DataLoader parameters (num_workers and a batch's torch.Size)" in fix.shm_size.basis
    # the configured default is the one given
    d = diagnose_text(BUS, catalogue, policy=Policy(default_shm_size=2 * GiB))
    fix = dataloader_fix(d)
    assert fix.shm_size is not None and fix.shm_size.bytes == 2 * GiB


@pytest.mark.parametrize(
    ("loader", "shm", "memory"),
    [
        # was --shm-size=8g --memory=9g: the signature's 8 GiB plus the 1 GiB limit
        ("", "1g", "2g"),
        # 256 MiB (plan's size) beside the 1 GiB margin under a 1 GiB limit: 1.25 GiB
        (
            "DataLoader(ds, batch_size=32, num_workers=4)\nx: torch.Size([32, 3, 224, 224])\n",
            "256m",
            "1280m",
        ),
    ],
)
def test_the_memory_limit_follows_the_same_decision(
    catalogue: Sequence[Signature], loader: str, shm: str, memory: str
) -> None:
    log = "$ docker run --memory=1g --gpus all trainer python train.py\n" + loader + BUS
    fix = dataloader_fix(diagnose_text(log, catalogue))
    assert fix.shm_size is not None and fix.shm_size.memory_limit == fix.memory_limit
    assert fix_snippets(fix)[0].text == f"docker run --shm-size={shm} --memory={memory} IMAGE ..."


def _reports() -> list[dict[str, Any]]:
    paths = [*sorted(CORPUS.glob("*.jsonl")), FIXTURES / "public_reports.jsonl"]
    out: dict[str, dict[str, Any]] = {}
    for p in paths:
        for line in p.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out.setdefault(r["id"], r)
    return list(out.values())


def test_public_dataloader_reports_get_no_size_above_plans_or_the_default(
    catalogue: Sequence[Signature],
) -> None:
    """Every public report (the corpus and the reports explain was built on), explained with
    its configuration as a second input, as ``explain LOG CONFIG`` would: a DataLoader
    failure's size is what ``plan`` gives for the loader the inputs show, or, when they show
    none, the policy's default with the pointers, raised only by a /dev/shm size the log
    itself shows (twice it)."""
    policy = Policy()
    sized = 0
    for r in _reports():
        inputs = [("log", io.BytesIO(str(r["log"]).encode()))]
        if r.get("config"):
            inputs.append(("config", io.BytesIO(str(r["config"]).encode())))
        d = explain_streams(inputs, signatures=catalogue)
        for res in d.results:
            if res.kind not in MODELLED_KINDS or res.fix is None or res.fix.shm_size is None:
                continue
            sized += 1
            size = res.fix.shm_size
            shown = [f.bytes for f in d.facts if f.name in ("shm_total", "shm_avail")]
            lines = [str(r["log"]), str(r.get("config") or "")]
            loader = seen(*"\n".join(lines).splitlines()).request()
            if loader is not None:
                planned = make_plan(loader[0], policy).shm
                assert planned is not None and size.bytes <= planned.bytes, r["id"]
            elif shown:
                assert size.source in ("default", "ran-short"), r["id"]
                assert size.bytes == default_shm_size(policy, too_small=max(shown)).bytes, r["id"]
            else:
                assert (size.source, size.bytes) == ("default", policy.default_shm_size), r["id"]
                assert PLAN_HINT in res.fix.next, r["id"]
    assert sized >= 30  # 30 DataLoader-kind causes with a size on 2026-12-02

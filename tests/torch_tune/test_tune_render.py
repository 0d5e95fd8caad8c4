"""The tune report, its JSON body and its plot, from result values (no trial runs here; the
real-trial tests render real results through the CLI)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from schema_registry import validator
from shmguard.estimate.policy import Policy
from shmguard.render.json import dumps
from shmguard.render.json_bodies import tune_body
from shmguard.render.parts import print_parts
from shmguard.render.tune_text import kwargs_text, tune_report
from shmguard.torch.tuning import Budget, Trial, TuneResult, container_settings
from shmguard.torch.tuning.model import config
from shmguard.units import GiB, MiB

BUDGET = Budget(shm=64 * MiB, memory=2 * GiB, cpus=2.0, sources=("shm: given",))


def result() -> TuneResult:
    base = dict(data_wait=0.5, memory_peak=200 * MiB, cpu_seconds=3.0, wall_time=4.0)
    trials = (
        Trial(config(0), "ok", samples_per_s=200.0, peak_shm=0, predicted_peak=0, **base),
        Trial(
            config(1),
            "ok",
            samples_per_s=400.0,
            repeats=(380.0, 400.0, 420.0),
            spread=0.1,
            single_samples_per_s=450.0,
            peak_shm=20 * MiB,
            predicted_peak=26 * MiB,
            batch_pages=5 * MiB,
            **base,
        ),
        Trial(
            config(2),
            "ok",
            samples_per_s=405.0,
            peak_shm=30 * MiB,
            predicted_peak=35 * MiB,
            batch_pages=5 * MiB,
            **base,
        ),
        Trial(
            config(2, 4), "ruled-out", "model peak 70 MiB > 64 MiB budget", predicted_peak=70 * MiB
        ),
    )
    settings = container_settings(trials[1], BUDGET, Policy())
    return TuneResult("train:make", BUDGET, 30, 0.0, trials, trials[2], trials[1], settings,
                      notes=("pin_memory not tried: no GPU here",), wall_time=20.0)  # fmt: skip


def test_settings_come_from_the_sizing_policy_within_the_budget() -> None:
    s = result().settings
    assert s is not None
    # the larger of the measured 20 MiB and the model's 26 MiB peak, + 25% = 32.5 MiB, rounded
    # up to 40 MiB (the model's peak as a floor after headroom gave 28 MiB: 93% full)
    assert s.shm_size == 40 * MiB
    assert "the larger of measured peak 20 MiB and the DataLoader model's peak" in s.shm_basis
    # non-shm 180 MiB + 40 MiB + 1 GiB margin -> 1.25 GiB, under the 2 GiB budget
    assert s.memory_limit == 1280 * MiB and s.cpus == 2.0
    tight = Budget(shm=24 * MiB, memory=GiB, cpus=1.0)
    capped = container_settings(result().trials[1], tight, Policy())
    assert (capped.shm_size, capped.memory_limit) == (24 * MiB, GiB)
    assert "capped at the 24 MiB budget" in capped.shm_basis
    none = container_settings(result().trials[0], BUDGET, Policy())
    assert none.shm_size == 64 * MiB and "num_workers=0" in none.shm_basis
    # 80% of a 64 MiB /dev/shm: any size works for num_workers=0, so a whole MiB within the
    # budget, not the budget's own bytes (a new user got --shm-size=52428k)
    eighty = Budget(shm=int(0.8 * 64 * MiB), memory=2 * GiB, cpus=1.0)
    zero = container_settings(result().trials[0], eighty, Policy())
    assert zero.shm_size == 51 * MiB
    assert "any size works" in zero.shm_basis and "largest whole MiB" in zero.shm_basis
    # the CPUs the trials ran under are in the fix, so in every snippet
    assert {(c.setting.value, c.value) for c in zero.changes} >= {("cpu-limit", 1000)}


def test_text_report_lists_every_trial_and_the_recommendation() -> None:
    out = io.StringIO()
    print_parts(Console(file=out, width=120, color_system=None), tune_report(result()))
    text = out.getvalue()
    assert "*  nw=1 pf=2" in text and "nw=2 pf=4" in text and "ruled-out: model peak" in text
    assert "DataLoader(..., num_workers=1, prefetch_factor=2, persistent_workers=False, " \
        "pin_memory=False)" in text  # fmt: skip
    assert "99% of the fastest (nw=2 pf=2)" in text
    assert "docker run --shm-size=40m --memory=1280m --cpus=2 IMAGE ..." in text
    assert "sizeLimit: 40Mi" in text and "--cpus=2" in text
    assert "pin_memory not tried: no GPU here" in text
    # the re-measured trial: 3 runs, 10% spread; the others stand on one run
    assert "*  nw=1 pf=2        400  3 (10%)" in text
    assert "   nw=2 pf=2        405        1" in text
    assert "ruled-out [1]" in text
    assert kwargs_text(result().trials[0]) == "num_workers=0, pin_memory=False"


def test_narrow_table_keeps_room_for_the_outcome() -> None:
    # 80 columns, no confirmation round: no runs/spread columns, the reason stays readable
    plain = replace(result(), trials=tuple(replace(t, repeats=(), spread=None)
                                           for t in result().trials))  # fmt: skip
    out = io.StringIO()
    print_parts(Console(file=out, width=80, color_system=None), tune_report(plain))
    text = out.getvalue()
    assert "runs" not in text.split("Recommendation")[0]
    assert "ruled-out [1]" in text
    assert "[1] nw=2 pf=4 ruled-out: model peak 70 MiB > 64 MiB budget" in text


def test_json_body_validates_against_the_schema() -> None:
    data = json.loads(dumps("tune", tune_body(result())))
    schema = validator("tune")
    schema.validate(data)
    assert data["schema"] == "shmguard.tune/1"
    assert data["recommended_kwargs"] == config(1).kwargs()
    assert [t["status"] for t in data["trials"]] == ["ok", "ok", "ok", "ruled-out"]
    assert data["trials"][1]["repeats"] == [380.0, 400.0, 420.0]
    assert (data["trials"][1]["spread"], data["trials"][1]["single_samples_per_s"]) == (0.1, 450)
    assert data["trials"][0]["repeats"] == [] and data["trials"][0]["spread"] is None
    assert (
        data["settings"]["snippets"][0]["text"]
        == "docker run --shm-size=40m --memory=1280m --cpus=2 IMAGE ..."
    )
    bad = dict(data, trials=[dict(data["trials"][0], status="slow")])
    with pytest.raises(jsonschema.ValidationError):
        schema.validate(bad)


def test_plot_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from shmguard.render.tune_plot import plot_tune

    path = plot_tune(result(), tmp_path / "t.png")
    assert path.read_bytes()[:4] == b"\x89PNG"

"""`shmguard tune` and `shmguard.torch.tune` on real PyTorch 2.13 loaders in real sandboxes.

Budgets are a few MiB and batches 1 MiB (tune_factories.small), so a whole search takes under
a minute on 2 CPUs. Throughput on a shared machine is noisy: the tests hold what the budget
guarantees, never which configuration wins.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from schema_registry import validator
from shmguard.torch.tuning import TuneProgress, TuneResult, tune
from shmguard.torch.tuning.model import TrialConfig, config
from shmguard.torch.tuning.trial import (
    TrialPlan,
    _report,
    default_pythonpath,
    run_confirmation,
    run_trial,
)
from shmguard.units import GiB, MiB

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
SMALL = "tune_factories:small"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(default_pythonpath())}
    return subprocess.run(
        [sys.executable, "-m", "shmguard", "tune", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=HERE,
        env=env,
    )


@pytest.mark.timeout(150)
def test_recommendation_fits_the_budgets_it_was_tuned_for(root_only: None) -> None:
    events: list[TuneProgress] = []
    shm, memory = 6 * MiB, GiB
    # No step time: the loop always waits for data, so the sweep reaches 2 workers.
    result = tune(
        SMALL,
        budget_shm=shm,
        budget_memory=memory,
        cpus=2,
        steps=8,
        warmup=2,
        progress=events.append,
    )
    assert isinstance(result, TuneResult)
    assert not result.interrupted
    rec, settings = result.recommended, result.settings
    assert rec is not None and settings is not None and result.best is not None
    assert rec.ok and (rec.samples_per_s or 0) >= 0.98 * (result.best.samples_per_s or 0)
    assert result.trials[0].config == config(0) and result.trials[0].batch_pages > MiB
    for t in result.trials:
        if t.status == "ruled-out":
            # ruled out by the model, never run
            assert (t.predicted_peak or 0) > shm and t.peak_shm is None and t.wall_time == 0
        else:
            assert (t.predicted_peak or 0) <= shm, t
            assert t.ok, t  # the model's bound held: nothing that fits it failed
            assert (t.peak_shm or 0) <= shm and (t.memory_peak or 0) <= memory
    # 2 workers x prefetch 2 would need (4 + 2) batches of 1 MiB and a page: ruled out, listed,
    # and prefetch 1 tried in its place
    ruled = [t.config for t in result.trials if t.status == "ruled-out"]
    assert config(2, 2) in ruled
    assert any(t.config == config(2, 1) and t.ok for t in result.trials)
    assert settings.shm_size <= shm and settings.memory_limit is not None
    assert settings.memory_limit <= memory and settings.cpus == 2
    assert [c.setting.value for c in settings.changes] == ["shm-size", "memory-limit", "cpu-limit"]
    assert settings.changes[-1].value == 2000  # the 2 CPUs it ran under
    run = [t for t in result.trials if t.status != "ruled-out"]
    search = [e for e in events if e.phase == "search"]
    assert [e.config for e in search if e.trial is None] == [t.config for t in run]
    # Each run trial is the last one reported for its configuration: the search's, or, when
    # finalists came within the margin of each other (load on the machine decides that), the
    # confirmation round's re-measured one, which replaces it in the list.
    last = {e.config: e.trial for e in events if e.trial is not None}
    assert [last[t.config] for t in run] == run
    confirm = [e for e in events if e.phase == "confirm"]
    assert all(set(e.finalists) <= {t.config for t in run} for e in confirm)
    # The recommendation again, in a tmpfs of exactly the shm budget and a memory cgroup of
    # exactly the memory budget: it runs, within both.
    plan = TrialPlan(SMALL, 16, 2, 0.0, shm, memory, 2.0, 60, 5.0, default_pythonpath())
    again, measured = run_trial(plan, rec.config)
    assert again.ok, again
    assert measured.shm_size == shm and measured.memory_limit == memory
    assert measured.peak <= shm and (again.memory_peak or 0) <= memory


@pytest.mark.timeout(90)
def test_confirmation_measures_the_finalists_in_alternation_in_one_sandbox(
    root_only: None,
) -> None:
    plan = TrialPlan(SMALL, 4, 1, 0.0, 8 * MiB, GiB, 2.0, 60, 5.0, default_pythonpath())
    configs = [config(0), config(1, 1), config(1, 1, True)]
    rates, reason, measured = run_confirmation(plan, configs, 2)
    assert reason == "" and rates is not None, reason
    assert [len(r) for r in rates] == [2, 2, 2] and min(min(r) for r in rates) > 0
    # one sandbox of the budget for all six runs, within it
    assert measured.shm_size == 8 * MiB and 0 < measured.peak <= 8 * MiB


@pytest.mark.timeout(90)
def test_a_config_beyond_the_shm_budget_fails_as_infeasible(root_only: None) -> None:
    # 2 workers x prefetch 4 of 1 MiB batches need about 10 MiB; the tmpfs has 3.
    plan = TrialPlan(SMALL, 30, 2, 0.0, 3 * MiB, None, None, 60, 2.0, default_pythonpath())
    trial, measured = run_trial(plan, config(2, 4))
    assert trial.status == "infeasible", trial
    assert trial.outcome in ("shm-exhausted", "hang", "sigbus")
    assert trial.samples_per_s is None and measured.peak > 2 * MiB


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "raises",
            "tune_factories:raises(**{'num_workers': 0, 'prefetch_factor': None, "
            "'persistent_workers': False, 'pin_memory': False}) raised RuntimeError: "
            "dataset path /data/train does not exist",
        ),
        (
            "not_a_loader",
            "tune_factories:not_a_loader returned builtins.list, not a torch.utils.data.DataLoader",
        ),
        (
            "fixed_workers",
            "tune_factories:fixed_workers(num_workers=0) returned a DataLoader with "
            "num_workers=4: the factory must pass its num_workers keyword to the DataLoader",
        ),
        ("missing", "module tune_factories has no attribute missing"),
        (
            "raises_after",
            "tune_factories:raises_after: iterating its DataLoader (num_workers=0) raised "
            "KeyError: 'sample 8 is missing from the index' at batch 3",
        ),
        (
            # found by the first trial that sets one of them otherwise than torch's defaults:
            # the trials cross epochs, so persistent workers are tried at 1 worker
            "ignores_prefetch",
            "tune_factories:ignores_prefetch(persistent_workers=True) returned a DataLoader "
            "with persistent_workers=False: the factory must pass its persistent_workers "
            "keyword to the DataLoader, or tune would recommend a setting that changes nothing",
        ),
    ],
)
def test_bad_factories_are_one_line_errors(root_only: None, factory: str, message: str) -> None:
    done = cli("--loader", f"tune_factories:{factory}", "--budget-shm", "8m", "--quiet")
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"shmguard: error: {message}\n"
    assert done.stdout == ""


def child(factory: str, cfg: TrialConfig, steps: int = 6) -> tuple[dict[str, Any] | None, str]:
    """One trial's child, run directly (no sandbox): its report and its stdout."""
    spec = {"loader": f"tune_factories:{factory}", "kwargs": cfg.kwargs(), "steps": steps,
            "warmup": 1, "step_time": 0.0}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(default_pythonpath())}
    done = subprocess.run(
        [sys.executable, "-m", "shmguard.torch.tuning._child", json.dumps(spec)],
        capture_output=True, cwd=HERE, env=env, timeout=60,
    )  # fmt: skip
    return _report(done.stdout), done.stderr.decode()


@pytest.mark.timeout(90)
def test_chatty_unbatched_and_iterable_loaders_are_measured() -> None:
    # Workers printing long lines and half lines (no newline): the report is still found.
    report, err = child("chatty", config(2, 2))
    assert report is not None and report["samples"] == 6 * 4, err
    # batch_size=None: every item is one sample, not the first dimension of its tensor (1024)
    report, err = child("unbatched", config(1, 2))
    assert report is not None and report["samples"] == 6, err
    # an IterableDataset sharded by worker, across epochs (10 batches an epoch)
    report, err = child("iterable", config(2, 1, True), steps=25)
    assert report is not None and report["samples"] == 25 * 4 and report["epochs"] == 3, err
    # the package does not import the module python -m runs (runpy warned in every trial)
    assert "RuntimeWarning" not in err


@pytest.mark.timeout(90)
def test_json_validates_and_the_plot_is_written(root_only: None, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "tune.png"
    # 6 MiB for 2 ranks: 3 MiB each, less than one worker's (1 x 1 + 2) 1 MiB batches need.
    done = cli(
        "--loader", SMALL, "--budget-shm", "6m", "--local-ranks", "2", "--cpus", "1",
        "--steps", "5", "--json", "--plot", str(png),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    validator("tune").validate(data)
    assert data["budget"]["rank_shm"] == 3 * MiB and data["budget"]["rank_cpus"] == 0.5
    assert data["recommended_kwargs"] == config(0).kwargs()
    statuses = [t["status"] for t in data["trials"]]
    assert statuses == ["ok", "ruled-out", "ruled-out"]
    assert data["settings"]["shm_size"] <= 6 * MiB
    assert {s["runtime"] for s in data["settings"]["snippets"]} >= {"docker", "kubernetes"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def interrupt(args: list[str], after: str, wait: float) -> tuple[int, str, str]:
    """Run ``shmguard tune ARGS``, send SIGINT ``wait`` seconds after ``after`` appears on its
    stderr; its exit status, stdout and stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(default_pythonpath()), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", "tune", "--loader", SMALL, "--budget-shm", "64m",
         *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
        env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    deadline = time.monotonic() + 100
    seen = ""
    while after not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert after in seen, seen
    time.sleep(wait)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.timeout(120)
def test_ctrl_c_keeps_what_was_found(root_only: None) -> None:
    # 3 s after the first trial: into the second
    code, out, err = interrupt(["--steps", "400", "--step-time", "0.02"], "nw=0: ok", 3)
    assert code == 130, err
    assert "Interrupted" in out
    assert "nw=0 " in out and "num_workers=0" in out  # the trial that finished is reported


@pytest.mark.timeout(150)
def test_ctrl_c_in_the_confirmation_round_keeps_the_single_trials(root_only: None) -> None:
    # A 20 ms step: the loop waits for data without workers, and every configuration is
    # within 50% of the fastest, so there are finalists to re-measure; 20 rounds: the round
    # cannot end within the 4 s.
    args = ["--cpus", "1", "--steps", "30", "--step-time", "0.02", "--confirm-rounds", "20"]
    code, out, err = interrupt(args, "confirming in alternation", 4)
    assert code == 130, err
    assert "Interrupted" in out
    assert "the confirmation round did not finish (interrupted by SIGINT)" in " ".join(out.split())
    assert "DataLoader(..., num_workers=" in out  # picked from the single trials


@pytest.mark.timeout(120)
@pytest.mark.parametrize("delay", [0.3, 0.6, 1.0, 1.8])
def test_ctrl_c_while_starting_is_one_line_and_exit_130(root_only: None, delay: float) -> None:
    # While the commands load, Typer builds them, the options are read or the fork server
    # imports torch: one line on stderr, exit 130, no traceback, nothing left running (once
    # the first trial runs: the report of what was found, as test_ctrl_c_keeps_what_was_found).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(default_pythonpath())}
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", "tune", "--loader", SMALL, "--budget-shm", "8m",
         "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE, env=env,
    )  # fmt: skip
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if "init_import_site" in err:
        pytest.skip("the signal came while Python itself was starting, before shmguard's code")
    # 130, or death by SIGINT (a shell shows 130 for both) after the same one line: CPython
    # 3.11 marks a KeyboardInterrupt raised inside exec() of a string (a dataclass being
    # created while shmguard imports) as unhandled even once caught, and ends by SIGINT.
    assert proc.returncode in (130, -signal.SIGINT), err
    if out:
        assert "Interrupted" in out and err == ""
    else:
        assert err in (
            "shmguard: interrupted while starting\n",
            "shmguard: error: interrupted before the first trial ended; nothing to report\n",
        )
    assert not servers_of(proc.pid)


def servers_of(pid: int) -> list[str]:
    """Command lines of tune fork servers (their last argument: the parent's pid) of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"shmguard.torch.tuning._zygote" in argv and argv[-2:-1] == [str(pid).encode()]:
            found.append(b" ".join(argv).decode())
    return found

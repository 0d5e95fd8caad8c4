"""tune's fork server (torch/tuning/zygote.py, _zygote.py): trials forked from one process that
imported torch and the loader's module once, each still in a process and a sandbox of its own,
on real PyTorch in real sandboxes."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import shmguard.torch.tuning.trial as trials
from shmguard.torch.tuning import TuneInputError, tune
from shmguard.torch.tuning.model import TrialConfig, config
from shmguard.torch.tuning.trial import TrialPlan, run_trial, trial_env
from shmguard.torch.tuning.zygote import Zygote, start
from shmguard.units import GiB, MiB

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.root, pytest.mark.slow]

SMALL = "tune_factories:small"
PLAN = TrialPlan(SMALL, 8, 2, 0.0, 8 * MiB, GiB, 2.0, 60, 5.0, trials.default_pythonpath())


@pytest.fixture
def zygote(root_only: None) -> Iterator[Zygote]:
    server, why = start(SMALL, trial_env(PLAN), PLAN.memory, 60)
    assert server is not None, why
    yield server
    server.close()
    assert server.proc.returncode is not None  # ended, not left behind


def report(plan: TrialPlan, cfg: TrialConfig) -> dict[str, Any]:
    """The child's report of one trial of ``cfg``."""
    spec = {"loader": plan.loader, "steps": plan.steps, "warmup": plan.warmup,
            "step_time": plan.step_time, "kwargs": cfg.kwargs()}  # fmt: skip
    got, measured = trials._measure(plan, spec)
    assert got is not None and measured.passed, measured.stderr_tail
    return got


@pytest.mark.timeout(120)
def test_a_forked_trial_measures_what_a_fresh_one_does(zygote: Zygote) -> None:
    forked = replace(PLAN, zygote=zygote)
    # import torch alone: about 150 MB here, held by the server and shared with its forks
    assert 50 * MiB < zygote.anon < 600 * MiB
    for cfg in (config(0), config(1, 2), config(2, 1, True)):
        fresh = run_trial(PLAN, cfg)[0]
        trial, run = run_trial(forked, cfg)
        assert fresh.ok and trial.ok, (fresh, trial)
        # its own sandbox of the budget: the tmpfs, the memory limit, a cgroup peak
        assert run.shm_size == 8 * MiB and run.memory_limit == GiB
        assert trial.batch_pages == fresh.batch_pages > MiB
        assert trial.predicted_peak == fresh.predicted_peak
        if cfg.num_workers:
            assert 0 < (trial.peak_shm or 0) <= 8 * MiB
        else:
            assert trial.peak_shm == fresh.peak_shm == 0
        # the server's memory is counted, as a fresh process is charged for it
        assert trial.memory_peak is not None and fresh.memory_peak is not None
        assert trial.memory_peak >= zygote.anon
        assert trial.memory_peak >= 0.9 * fresh.memory_peak
        assert not zygote.dead and zygote.proc.poll() is None
    # the same batches, and torch's intra-op threads as a fresh Python has them
    got, want = report(forked, config(1, 2)), report(PLAN, config(1, 2))
    assert got["samples"] == want["samples"] == 8 * 8
    assert got["leaves"] == want["leaves"] and got["threads"] == want["threads"] >= 1


@pytest.mark.timeout(120)
def test_a_crashed_hung_or_over_budget_trial_ends_only_its_own_process(zygote: Zygote) -> None:
    forked = replace(PLAN, zygote=zygote)
    crashed, run = run_trial(replace(forked, loader="tune_factories:aborts"), config(0))
    assert crashed.status == "failed" and run.signal == "SIGABRT", crashed
    # 2 workers x prefetch 4 of 1 MiB batches need about 10 MiB; the tmpfs has 3
    over = replace(forked, shm=3 * MiB, steps=30, hang_after=2.0)
    full, run = run_trial(over, config(2, 4))
    assert full.status == "infeasible" and run.peak > 2 * MiB, full
    hung, run = run_trial(replace(forked, steps=400, step_time=0.05, timeout=2.0), config(1, 2))
    assert hung.status == "infeasible" and hung.outcome == "timeout", hung
    assert not zygote.dead and zygote.proc.poll() is None  # the server lives on
    assert run_trial(forked, config(1, 1))[0].ok
    # a server that died: the next trial starts a fresh Python, and runs
    os.kill(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait()
    again, run = run_trial(forked, config(0))
    assert again.ok and zygote.dead and run.memory_limit == GiB


@pytest.mark.timeout(60)
def test_a_module_that_starts_threads_or_a_small_memory_budget_is_not_forked(
    root_only: None,
) -> None:
    server, why = start("tune_threaded:loader", trial_env(PLAN), None, 60)
    assert server is None
    assert why == "tune_threaded:loader's module started 1 thread(s) at import"
    # native threads too: the OpenMP pool a parallel operation at import starts
    server, why = start("tune_openmp:loader", trial_env(PLAN), None, 60)
    assert server is None
    assert re.fullmatch(r"tune_openmp:loader's module started [1-9]\d* thread\(s\) at import", why)
    server, why = start(SMALL, trial_env(PLAN), 16 * MiB, 60)
    assert server is None
    assert why == "the memory budget is not above what torch and the loader's module take"


def _tune_all_ok(loader: str) -> list[str]:
    """tune ``loader`` on a small budget; every trial that ran was ok; its notes."""
    result = tune(loader, budget_shm=8 * MiB, budget_memory=GiB, cpus=1, steps=4, warmup=1,
                  confirm_rounds=0, trial_timeout=30)  # fmt: skip
    assert result.recommended is not None and not result.interrupted
    assert all(t.ok for t in result.trials if t.status != "ruled-out")
    return result.notes


@pytest.mark.timeout(120)
def test_tune_says_when_its_trials_were_not_forked(root_only: None) -> None:
    assert "each trial started a fresh Python: tune_threaded:loader's module started 1 " \
        "thread(s) at import" in _tune_all_ok("tune_threaded:loader")  # fmt: skip


@pytest.mark.timeout(120)
def test_trials_forked_from_a_module_that_ignores_sigchld_end(root_only: None) -> None:
    # SIGCHLD ignored at import: the server's waitpid failed and every trial hung
    assert not any("fresh Python" in n for n in _tune_all_ok("tune_sigchld:loader"))


@pytest.mark.timeout(60)
def test_a_module_that_does_not_import_is_a_one_line_error(root_only: None) -> None:
    with pytest.raises(TuneInputError) as err:
        tune("tune_nowhere:loader", budget_shm=8 * MiB, budget_memory=GiB, cpus=1)
    assert str(err.value) == (
        "cannot import tune_nowhere: ModuleNotFoundError: No module named 'tune_nowhere'"
    )

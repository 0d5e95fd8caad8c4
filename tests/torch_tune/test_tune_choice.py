"""The tuner's decisions that need no trial: the pick, the sweep, the budget, the factory name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shmguard.torch.tuning import (
    Budget,
    BudgetError,
    Trial,
    TuneInputError,
    loader_ref,
    pick,
    read_budget,
)
from shmguard.torch.tuning.model import TrialConfig, config
from shmguard.torch.tuning.search import Search, sweep_points
from shmguard.torch.tuning.trial import predicted_peak, ruled_out
from shmguard.units import GiB, MiB

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def ok(nw: int, pf: int, rate: float, peak: int = 0) -> Trial:
    return Trial(config(nw, pf), "ok", samples_per_s=rate, data_wait=0.1, peak_shm=peak)


def test_pick_is_the_cheapest_within_two_percent_of_the_best() -> None:
    trials = [
        ok(0, 2, 500.0),
        ok(1, 2, 900.0, 10 * MiB),
        ok(2, 2, 1000.0, 20 * MiB),
        ok(4, 2, 985.0, 40 * MiB),
        ok(2, 1, 981.0, 12 * MiB),
        Trial(config(8, 2), "infeasible", "shm-exhausted: ..."),
    ]
    best, chosen = pick(trials)
    assert best is trials[2]
    # 2 workers with prefetch 1 is 1.9% slower: as fast, and cheaper than prefetch 2 or 4 workers.
    assert chosen is trials[4]


def test_pick_prefers_fewer_workers_then_less_shm() -> None:
    a, b, c = ok(2, 2, 1000.0, 20 * MiB), ok(1, 4, 990.0, 25 * MiB), ok(1, 2, 990.0, 15 * MiB)
    assert pick([a, b, c]) == (a, c)
    assert pick([Trial(config(1), "ruled-out")]) == (None, None)


def test_sweep_points_are_geometric_up_to_the_cap() -> None:
    assert sweep_points(0) == []
    assert sweep_points(1) == [1]
    assert sweep_points(2) == [1, 2]
    assert sweep_points(6) == [1, 2, 4, 6]
    assert sweep_points(8) == [1, 2, 4, 8]


def test_a_num_workers_0_that_wins_its_single_trial_still_gets_the_workers_refined() -> None:
    # A new user's seed run: nw=0 857 samples/s once (234 when re-measured), nw=1 688, nw=2
    # 698; prefetch_factor and persistent_workers were then never tried at 2 workers.
    rates = {0: 857.0, 1: 688.0, 2: 698.0}

    def run(cfg: TrialConfig) -> Trial:
        rate = rates[cfg.num_workers] * (1.05 if cfg.persistent_workers else 1.0)
        return Trial(cfg, "ok", samples_per_s=rate, data_wait=0.5, epochs=2, batch_pages=16)

    search = Search(run, Budget(shm=GiB, memory=None, cpus=2.0), cpu_workers=2)
    search.execute()
    tried = {t.config for t in search.trials}
    assert search.best() is not None and search.best().config == config(0)  # type: ignore[union-attr]
    best_workers = search.best_workers()
    assert best_workers is not None and best_workers.config.num_workers == 2
    pw = best_workers.config.persistent_workers
    assert {config(2, 1, pw), config(2, 4, pw)} <= tried  # prefetch_factor at 2 workers
    assert any(c.num_workers == 2 and c.persistent_workers for c in tried)
    assert not any("persistent_workers not tried" in n for n in search.notes)


def test_a_config_whose_model_peak_exceeds_the_budget_is_ruled_out() -> None:
    batch = 18 * MiB + 4096  # B' of a float32 32x3x224x224 batch plus its labels page
    assert predicted_peak(config(0), batch) == 0
    # (1 x 2 + 2) batches + 11 semaphore pages > 64 MiB; (1 x 1 + 2) batches fit.
    out = ruled_out(config(1, 2), batch, 64 * MiB)
    assert out is not None and out.status == "ruled-out"
    assert out.predicted_peak == 4 * batch + 11 * 4096
    assert "64 MiB budget" in out.reason
    assert ruled_out(config(1, 1), batch, 64 * MiB) is None


def test_config_drops_what_torch_refuses_without_workers() -> None:
    c = config(0, 4, persistent_workers=True)
    assert c.kwargs() == {
        "num_workers": 0,
        "prefetch_factor": None,
        "persistent_workers": False,
        "pin_memory": False,
    }
    assert config(2, 1, True).label() == "nw=2 pf=1 persistent"


def test_budget_divides_among_local_ranks() -> None:
    b = Budget(shm=GiB, memory=8 * GiB, cpus=8.0, local_ranks=4)
    assert (b.rank_shm, b.rank_memory, b.rank_cpus) == (256 * MiB, 2 * GiB, 2.0)


def _tree(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(HOSTS / name, root)
    (root / "dev" / "shm").mkdir(parents=True, exist_ok=True)
    return root


def test_budget_from_a_docker_container(tmp_path: Path) -> None:
    # --shm-size 64m, --memory 8g, --cpus 2 over a 16-CPU cpuset (cgroup v2).
    b = read_budget(root=_tree("docker-v2-default", tmp_path))
    assert b.shm == int(64 * MiB * 0.8) // 4096 * 4096
    assert b.memory == 8 * GiB
    assert b.cpus <= 2.0
    assert any("80% of this container's 64 MiB" in s for s in b.sources)


def test_budget_refuses_the_hosts_unsized_dev_shm(tmp_path: Path) -> None:
    root = _tree("docker-v1-ipc-host", tmp_path)
    with pytest.raises(BudgetError, match=r"unsized .*give --budget-shm SIZE"):
        read_budget(root=root)
    given = read_budget(shm=256 * MiB, cpus=1.0, local_ranks=2, root=root)
    assert (given.shm, given.rank_shm, given.memory, given.cpus) == (
        256 * MiB,
        128 * MiB,
        4 * GiB,
        1.0,
    )


def test_loader_ref_accepts_module_factory_text_and_importable_functions() -> None:
    from shmguard.examples import seed_loader

    assert loader_ref("pkg.mod:make") == "pkg.mod:make"
    assert loader_ref(seed_loader.loader) == "shmguard.examples.seed_loader:loader"
    for bad in ("nocolon", "mod:", ":f", "a b:f", "mod:f-g"):
        with pytest.raises(TuneInputError, match="expected MODULE:FACTORY"):
            loader_ref(bad)
    with pytest.raises(TuneInputError, match="module-level name"):
        loader_ref(lambda **kw: None)


def test_loader_ref_finds_lambdas_partials_and_classes_bound_to_module_attributes() -> None:
    import functools

    import tune_factories

    from shmguard.torch.guarded import GuardedLoader

    # functools.partial has no name of its own: 'functools:' once came back
    tune_factories.partial_factory = functools.partial(tune_factories.small)  # type: ignore[attr-defined]
    try:
        assert loader_ref(tune_factories.lambda_factory) == "tune_factories:lambda_factory"
        assert loader_ref(tune_factories.partial_factory) == "tune_factories:partial_factory"  # type: ignore[attr-defined]
    finally:
        del tune_factories.partial_factory  # type: ignore[attr-defined]
    assert loader_ref(GuardedLoader) == "shmguard.torch.guarded:GuardedLoader"  # a class
    with pytest.raises(TuneInputError, match="module-level name"):
        loader_ref(functools.partial(tune_factories.small, batch_size=2))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "--steps: must be >= 1, got 0"),
        (["--warmup", "-1"], "--warmup: must be >= 0, got -1"),
        (["--local-ranks", "0"], "--local-ranks: must be >= 1, got 0"),
        (["--step-time", "-1"], "--step-time: must be a finite number >= 0, got -1"),
        (["--trial-timeout", "0"], "--trial-timeout: must be greater than 0, got 0"),
        (["--cpus", "0"], "--cpus: must be greater than 0, got 0"),
        (["--budget-shm", "64x"], "--budget-shm: "),
        (["--loader", "train"], "--loader 'train': expected MODULE:FACTORY"),
    ],
)
def test_bad_options_are_one_line_errors(args: list[str], message: str) -> None:
    import subprocess
    import sys

    argv = ["--loader", "train:make", *args] if "--loader" not in args else args
    done = subprocess.run(
        [sys.executable, "-m", "shmguard", "tune", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"shmguard: error: {message}"), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_docs_list_exactly_the_options_of_tune() -> None:
    import re

    import typer.main

    from shmguard.cli import app

    command = typer.main.get_command(app).commands["tune"]  # type: ignore[attr-defined]
    options = {o for p in command.params for o in p.opts if o not in ("-h", "--help")}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "tune.md").read_text()
    table = doc[doc.index("## Options") : doc.index("## The search")]
    documented = set(re.findall(r"^\| `(-[^` ]+)", table, re.M))
    documented |= set(re.findall(r"^\| `-\w`, `(--[^` ]+)`", table, re.M))
    documented |= {"-q"} if "`-q`, `--quiet`" in table else set()
    assert documented == options


def test_a_skipped_confirmation_round_is_said() -> None:
    # num_workers=0 far ahead (a new user's loader: 37,892 samples/s without workers): no
    # other configuration within the finalists' margin, so no round runs, and a note says so.
    from shmguard.torch.tuning.api import _confirm

    def run(cfg: TrialConfig) -> Trial:
        rate = 37_892.0 if cfg.num_workers == 0 else 9_000.0
        return Trial(cfg, "ok", samples_per_s=rate, data_wait=0.5, epochs=1, batch_pages=4)

    search = Search(run, Budget(shm=GiB, memory=None, cpus=2.0), cpu_workers=2)
    search.execute()
    assert _confirm(search, None, 3, None, len(search.trials)) is False  # type: ignore[arg-type]
    assert any(n.startswith("no confirmation round: no other configuration came within 50%")
               for n in search.notes)  # fmt: skip

"""``shmguard.torch.tune``: the fastest DataLoader configuration that fits a budget.

The search is :mod:`~shmguard.torch.tuning.search`, each trial
:mod:`~shmguard.torch.tuning.trial`, the budget :mod:`~shmguard.torch.tuning.budget`. The
container settings for the pick go through the one size decision
(:func:`~shmguard.estimate.decide.choose_shm` of the measured peak and the DataLoader model's
peak: the larger gets the headroom; :func:`~shmguard.estimate.policy.memory_limit_for` of the
measured non-shm memory) and the one fix model (:func:`~shmguard.model.fix.shm_changes`),
capped at the budget: the pick ran within it, and its predicted peak fits it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shmguard.estimate.decide import Need, ShmEvidence, choose_shm
from shmguard.estimate.policy import Policy, memory_limit_for
from shmguard.measure.cgroups import available_cpus
from shmguard.model.fix import shm_changes
from shmguard.torch.tuning.budget import read_budget
from shmguard.torch.tuning.confirm import FINALIST_MARGIN, ROUNDS, confirmed, finalists, verdict
from shmguard.torch.tuning.model import Budget, Settings, Trial, TrialConfig, TuneResult
from shmguard.torch.tuning.search import TOLERANCE, Search, Stop, pick
from shmguard.torch.tuning.trial import (
    TrialPlan,
    TuneInputError,
    default_pythonpath,
    run_confirmation,
    run_trial,
    trial_env,
)
from shmguard.torch.tuning.zygote import start as start_zygote
from shmguard.units import DOCKER_DEFAULT_SHM, MiB, format_iec


@dataclass(frozen=True)
class TuneProgress:
    """One step of the search, for a progress display.

    Attributes:
        done: trials finished so far (ruled-out ones included).
        config: the configuration starting (``trial`` None) or finished.
        trial: the finished trial, or None when it is starting.
        finalists: in the confirmation round (``phase`` ``"confirm"``): every configuration
            re-measured; ``config`` is the first of them; then ``trial`` is one re-measured
            trial (one event each) once the round is done.
        phase: ``"search"`` or ``"confirm"``.
    """

    done: int
    config: TrialConfig
    trial: Trial | None
    finalists: tuple[TrialConfig, ...] = ()
    phase: str = "search"


def loader_ref(factory: str | Callable[..., Any]) -> str:
    """``MODULE:FACTORY`` for a factory given as that text or as an importable function.

    Raises:
        TuneInputError: the text is not ``MODULE:FACTORY``, or the callable cannot be imported
            by name in a new process (a nested function, a lambda or partial bound to no
            module attribute, or one defined in ``__main__``).
    """
    if isinstance(factory, str):
        module, sep, attr = factory.partition(":")
        if (
            not sep
            or not module
            or not attr
            or not all(p.isidentifier() for p in (*module.split("."), *attr.split(".")))
        ):
            raise TuneInputError(
                f"--loader {factory!r}: expected MODULE:FACTORY, e.g. "
                "shmguard.examples.seed_loader:loader"
            )
        return factory
    ref = _importable_name(factory) if callable(factory) else None
    if ref is None:
        raise TuneInputError(
            f"cannot tune {factory!r}: each trial imports the factory in a new process, so it "
            "must be a module-level name of an importable module (a function, a class, or a "
            "lambda or functools.partial bound to a module attribute; or pass "
            "'MODULE:FACTORY')"
        )
    return ref


def _importable_name(obj: Any) -> str | None:
    """``MODULE:NAME`` that gives back ``obj`` itself when imported, or None: its qualified
    name in its module, else a module attribute bound to it (a lambda or a
    ``functools.partial`` assigned to a name). ``__main__`` is never importable by a trial."""
    import sys

    owners = [
        getattr(obj, "__module__", None),
        getattr(getattr(obj, "func", None), "__module__", None),
    ]
    for owner in dict.fromkeys(o for o in owners if isinstance(o, str) and o != "__main__"):
        module = sys.modules.get(owner)
        if module is None:
            continue
        qualname = getattr(obj, "__qualname__", "")
        if isinstance(qualname, str) and qualname and "<" not in qualname:
            found: Any = module
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is obj:
                return f"{owner}:{qualname}"
        for name, value in vars(module).items():
            if value is obj and name.isidentifier():
                return f"{owner}:{name}"
    return None


def container_settings(trial: Trial, budget: Budget, policy: Policy) -> Settings:
    """The node's container settings for ``trial`` (see the module docstring)."""
    ranks = budget.local_ranks
    if trial.config.num_workers == 0:
        shm = DOCKER_DEFAULT_SHM
        shm_basis = (
            "num_workers=0 puts no batch in /dev/shm; the runtimes' default "
            f"{format_iec(DOCKER_DEFAULT_SHM)} is enough"
        )
        if shm > budget.shm:
            # any size works: the largest whole MiB within the budget, not the budget's odd
            # bytes (a 64 MiB /dev/shm's 80% budget gave --shm-size=52428k)
            shm = max(budget.shm // MiB, 1) * MiB
            shm_basis = (
                "num_workers=0 puts no batch in /dev/shm, so any size works (the runtimes' "
                f"default {format_iec(DOCKER_DEFAULT_SHM)} too); {format_iec(shm)} is the "
                f"largest whole MiB within the {format_iec(budget.shm)} budget"
            )
    else:
        peak = max(trial.peak_shm or 0, 1) * ranks
        predicted = (trial.predicted_peak or 0) * ranks
        model = Need(predicted, "the DataLoader model's peak") if predicted else None
        sized = choose_shm(ShmEvidence(measured=Need(peak, "measured peak"), model=model), policy)
        shm, shm_basis = sized.bytes, sized.basis
    if shm > budget.shm:  # (never for num_workers=0: sized within the budget above)
        shm = budget.shm
        shm_basis += f"; capped at the {format_iec(budget.shm)} budget the trial ran within"
    memory: int | None = None
    if trial.memory_peak is None:
        mem_basis = "the trial's memory cgroup peak is unknown, so no memory limit is given"
    else:
        non_shm = max(trial.memory_peak - (trial.peak_shm or 0), 0) * ranks
        memory = memory_limit_for(shm, policy, non_shm=non_shm)
        assert memory is not None
        mem_basis = (
            f"non-shm peak {format_iec(non_shm)} + shm {format_iec(shm)} + the policy's margin,"
            f" rounded up to {format_iec(memory)}"
        )
        if budget.memory is not None and memory > budget.memory:
            memory = budget.memory
            mem_basis += (
                f"; capped at the {format_iec(budget.memory)} budget the trial ran within "
                f"(its cgroup peak: {format_iec(trial.memory_peak * ranks)})"
            )
    cpu_millis = max(round(budget.cpus * 1000), 1)
    changes = shm_changes(shm, memory, cpu_millis=cpu_millis)
    return Settings(shm, shm_basis, memory, mem_basis, budget.cpus, changes)


def _confirm(
    search: Search,
    plan: TrialPlan,
    rounds: int,
    progress: Callable[[TuneProgress], None] | None,
    done: int,
) -> bool:
    """Re-measure the search's finalists in alternation (:mod:`.confirm`) and put the
    re-measured trials in its list; True when Ctrl-C stopped it."""
    final = finalists(search.trials)
    if not final:
        ran = sum(1 for t in search.trials if t.ok)
        if ran > 1:  # with one configuration that ran there is nothing to compare anyway
            search.notes.append(
                f"no confirmation round: no other configuration came within "
                f"{FINALIST_MARGIN:.0%} of the fastest, so the pick is from single trials"
            )
        return False
    configs = [t.config for t in final]
    if progress is not None:
        progress(TuneProgress(done, configs[0], None, tuple(configs), "confirm"))
    # Every run is as long as a trial's timed part; the timeout grows with the runs.
    longer = replace(plan, timeout=plan.timeout * rounds * len(configs))
    rates, reason, _ = run_confirmation(longer, configs, rounds)
    if rates is None:
        search.notes.append(f"the confirmation round did not finish ({reason}): the pick is "
                            "from single trials")  # fmt: skip
        return reason.startswith("interrupted")
    for trial, runs in zip(final, rates, strict=True):
        again = confirmed(trial, runs)
        search.trials[search.trials.index(trial)] = again
        if progress is not None:
            progress(TuneProgress(done, trial.config, again, tuple(configs), "confirm"))
    return False


def tune(
    factory: str | Callable[..., Any],
    *,
    budget_shm: int | None = None,
    budget_memory: int | None = None,
    cpus: float | None = None,
    local_ranks: int = 1,
    step_time: float = 0.0,
    steps: int = 30,
    warmup: int = 3,
    confirm_rounds: int = ROUNDS,
    trial_timeout: float = 60.0,
    hang_after: float = 5.0,
    policy: Policy | None = None,
    progress: Callable[[TuneProgress], None] | None = None,
    root: Path = Path("/"),
    fork_trials: bool = True,
) -> TuneResult:
    """Find the cheapest DataLoader configuration within 2% of the fastest (or that cannot
    be told apart from it) that fits the budget, by running each in a sandbox of the budget
    and re-measuring the finalists in alternation (:mod:`~shmguard.torch.tuning.confirm`).

    Args:
        factory: ``"MODULE:FACTORY"`` or an importable module-level function;
            ``FACTORY(num_workers=..., prefetch_factor=..., persistent_workers=...,
            pin_memory=...)`` must return a ``torch.utils.data.DataLoader`` built with them.
        budget_shm: bytes of /dev/shm for the node (default: 80% of this container's;
            refused when /dev/shm is the host's).
        budget_memory: bytes of memory limit for the node (default: this container's).
        cpus: CPUs for the node (default: this container's effective CPUs).
        local_ranks: ranks per node; each trial gets ``1/local_ranks`` of every budget.
        step_time: seconds of simulated training per batch.
        steps: timed batches per trial (after ``warmup`` batches).
        warmup: batches before timing starts.
        confirm_rounds: runs of each finalist in the confirmation round
            (:mod:`~shmguard.torch.tuning.confirm`; 0: none, the pick is from single trials).
        trial_timeout: seconds before a trial counts as infeasible (``timeout``).
        hang_after: seconds of full /dev/shm and no progress that count as a hang.
        policy: the sizing policy (default :class:`~shmguard.estimate.Policy`).
        progress: called as each trial starts and ends (the library never prints).
        root: filesystem root for reading this container's limits.
        fork_trials: fork every trial from one process that imported torch and the loader's
            module once (:mod:`~shmguard.torch.tuning.zygote`; each still in a process and a
            sandbox of its own), instead of starting a fresh Python for each; it falls back
            to fresh ones, with a note, where forking would not be faithful.

    Returns:
        the :class:`TuneResult`; ``interrupted`` when Ctrl-C stopped the search (what was
        found so far is kept).

    Raises:
        TuneInputError: the factory cannot be tuned (one line).
        shmguard.torch.tuning.budget.BudgetError: no budget can be told (one line).
        shmguard.measure.sandbox.SandboxError: the sandbox cannot be set up (not root).
        ValueError: for steps, warm-up, times or ranks out of range.
        KeyboardInterrupt: Ctrl-C before the first trial started (while reading the budget or
            starting the fork server; nothing is left running).
    """
    if steps < 1 or warmup < 0 or confirm_rounds < 0:
        raise ValueError(
            f"steps must be >= 1, warm-up and confirm rounds >= 0, got {steps}, {warmup} "
            f"and {confirm_rounds}"
        )
    for name, value in (("step time", step_time), ("trial timeout", trial_timeout)):
        if not math.isfinite(value) or value < 0 or (name == "trial timeout" and value == 0):
            raise ValueError(f"{name} must be a finite number of seconds, got {value:g}")
    ref = loader_ref(factory)
    budget = read_budget(
        shm=budget_shm, memory=budget_memory, cpus=cpus, local_ranks=local_ranks, root=root
    )
    here = available_cpus()
    trial_cpus = min(budget.rank_cpus, float(here))
    plan = TrialPlan(
        ref,
        steps,
        warmup,
        step_time,
        budget.rank_shm,
        budget.rank_memory,
        trial_cpus,
        trial_timeout,
        hang_after,
        default_pythonpath(),
    )
    notes: list[str] = []
    started = time.monotonic()
    if fork_trials:
        # Ctrl-C here (before any trial) ends the server and propagates, as during the budget
        zygote, why = start_zygote(ref, trial_env(plan), plan.memory, trial_timeout)
        if zygote is None:
            notes.append(f"each trial started a fresh Python: {why}")
        plan = replace(plan, zygote=zygote)
    try:
        return _tune(plan, budget, here, confirm_rounds, progress, policy, notes, started)
    finally:
        if plan.zygote is not None:
            plan.zygote.close()


def _tune(
    plan: TrialPlan,
    budget: Budget,
    here: int,
    confirm_rounds: int,
    progress: Callable[[TuneProgress], None] | None,
    policy: Policy | None,
    notes: list[str],
    started: float,
) -> TuneResult:
    """The search, the confirmation round and the pick (see :func:`tune`)."""
    trial_cpus = plan.cpus or 1.0
    if budget.rank_cpus > here:
        notes.append(
            f"the budget gives each rank {budget.rank_cpus:g} CPUs but this machine has "
            f"{here}: trials ran with {here}, so more workers could not be measured here"
        )
    interrupted = False
    done = 0

    def run(cfg: TrialConfig) -> Trial:
        nonlocal interrupted, done
        if progress is not None:
            progress(TuneProgress(done, cfg, None))
        try:
            trial, _ = run_trial(plan, cfg)
        except KeyboardInterrupt:
            interrupted = True
            raise Stop from None
        done += 1
        if progress is not None:
            progress(TuneProgress(done, cfg, trial))
        interrupted = interrupted or trial.status == "interrupted"
        return trial

    search = Search(run, budget, int(trial_cpus) or 1)
    try:
        search.execute()
    except KeyboardInterrupt:
        interrupted = True
    if not interrupted and confirm_rounds > 0:
        try:
            interrupted = _confirm(search, plan, confirm_rounds, progress, done)
        except KeyboardInterrupt:
            interrupted = True
            search.notes.append(
                "interrupted during the confirmation round: the pick is from single trials"
            )
    trials = tuple(search.trials)
    best, chosen = pick(trials)
    how = verdict(best, chosen, TOLERANCE)
    if how is not None:
        notes.insert(0, how)
    settings = container_settings(chosen, budget, policy or Policy()) if chosen else None
    return TuneResult(
        loader=plan.loader,
        budget=budget,
        steps=plan.steps,
        step_time=plan.step_time,
        trials=trials,
        best=best,
        recommended=chosen,
        settings=settings,
        interrupted=interrupted,
        notes=tuple(notes + search.notes),
        wall_time=time.monotonic() - started,
    )

"""``shmguard tune`` and :func:`shmguard.torch.tune`: the fastest DataLoader that fits the
container's CPU, memory and /dev/shm budget, found by running it there (docs/tune.md).

* :mod:`.budget`: the budget (given, or this container's limits);
* :mod:`.trial`: one configuration in a sandbox of the budget, measured;
* :mod:`.zygote`: the fork server the trials are forked from (one ``import torch``);
* :mod:`.search`: which configurations, in which order, and the pick;
* :mod:`.api`: :func:`tune`, the entry point, and the container settings of the pick.
"""

from __future__ import annotations

from shmguard.torch.tuning.api import TuneProgress, container_settings, loader_ref, tune
from shmguard.torch.tuning.budget import BudgetError, read_budget
from shmguard.torch.tuning.model import Budget, Settings, Trial, TrialConfig, TuneResult
from shmguard.torch.tuning.search import TOLERANCE, pick
from shmguard.torch.tuning.trial import TuneInputError

__all__ = [
    "TOLERANCE",
    "Budget",
    "BudgetError",
    "Settings",
    "Trial",
    "TrialConfig",
    "TuneInputError",
    "TuneProgress",
    "TuneResult",
    "container_settings",
    "loader_ref",
    "pick",
    "read_budget",
    "tune",
]

"""Sizing: the one sizing policy, the DataLoader shm model and recommendations from runs.

* :mod:`~shmguard.estimate.decide`: the one size decision (:func:`choose_shm`: evidence ->
  :class:`Sized`), used by every command that prints or writes a /dev/shm size;
* :mod:`~shmguard.estimate.policy`: rounding, headroom, the memory-limit rule and the default
  size, the policy :func:`choose_shm` applies;
* :mod:`~shmguard.estimate.dataloader`: the DataLoader shm model (steady level, peak);
* :mod:`~shmguard.estimate.recommend`: a measured or probed run's figures -> sizes to ship;
* :mod:`~shmguard.estimate.plan`: a DataLoader's parameters -> prediction, sizes and fix
  (``shmguard plan``).
"""

from __future__ import annotations

from shmguard.estimate.dataloader import (
    LoaderPrediction,
    LoaderSpec,
    batch_leaves,
    dataloader_bound,
    max_workers,
    padded_bytes,
    predict,
)
from shmguard.estimate.decide import (
    Documented,
    LogSize,
    Need,
    RanShort,
    ShmEvidence,
    choose_shm,
)
from shmguard.estimate.plan import (
    Plan,
    PlanFit,
    PlanRequest,
    check_fit,
    make_plan,
    workers_that_fit,
)
from shmguard.estimate.policy import (
    ALERT_PERCENT,
    DEFAULT_HEADROOM,
    DEFAULT_SHM_SIZE,
    Policy,
    Sized,
    clean_size,
    default_shm_size,
    memory_limit_for,
    shm_size_for,
)
from shmguard.estimate.recommend import Recommendation, recommend

__all__ = [
    "ALERT_PERCENT",
    "DEFAULT_HEADROOM",
    "DEFAULT_SHM_SIZE",
    "Documented",
    "LoaderPrediction",
    "LoaderSpec",
    "LogSize",
    "Need",
    "Plan",
    "PlanFit",
    "PlanRequest",
    "Policy",
    "RanShort",
    "Recommendation",
    "ShmEvidence",
    "Sized",
    "batch_leaves",
    "check_fit",
    "choose_shm",
    "clean_size",
    "dataloader_bound",
    "default_shm_size",
    "make_plan",
    "max_workers",
    "memory_limit_for",
    "padded_bytes",
    "predict",
    "recommend",
    "shm_size_for",
    "workers_that_fit",
]

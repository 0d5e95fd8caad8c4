"""Sizing: the one sizing policy, the DataLoader shm model and recommendations from runs.

* :mod:`~shmguard.estimate.policy`: rounding, headroom, the memory-limit rule and the default
  size, used by every command that prints or writes a size;
* :mod:`~shmguard.estimate.dataloader`: the measured bound of a DataLoader's shm use;
* :mod:`~shmguard.estimate.recommend`: a measured or probed run's figures -> sizes to ship.
"""

from __future__ import annotations

from shmguard.estimate.dataloader import dataloader_bound
from shmguard.estimate.policy import (
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
    "DEFAULT_HEADROOM",
    "DEFAULT_SHM_SIZE",
    "Policy",
    "Recommendation",
    "Sized",
    "clean_size",
    "dataloader_bound",
    "default_shm_size",
    "memory_limit_for",
    "recommend",
    "shm_size_for",
]
